//! The daemon's life: start-up in order, the server, the boot reconcile, the sweep, shutdown.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use reconcile_api::{Event, ReportView, RunFile, SessionView, VERSION, remove_run_file_if_ours};
use reconcile_core::{Report, SessionState};
use reconcile_engine::Host;
use reconcile_home::Home;
use reconcile_store::Store;
use tokio::signal::unix::{SignalKind, signal};

use crate::state::State;
use crate::{api, logging, startup};

/// How often a running daemon looks for sessions whose tmux session died.
const SWEEP_INTERVAL: Duration = Duration::from_secs(2);

/// How often a running daemon looks for orphan processes of ended sessions (a `/proc` scan).
const ORPHAN_SWEEP_EVERY: u32 = 30;

/// How long in-flight requests get once a stop was requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub fn run() -> anyhow::Result<()> {
    let home = Home::from_env()?;
    home.ensure()?;
    let _log = logging::init(&home)?;
    let port = reconcile_home::port()?;
    let socket = reconcile_home::tmux_socket()?;

    let _lock = startup::lock(&home)?;
    startup::own_process_group()?;
    let writer = Store::open(&home.database())?;
    let reader = Store::open(&home.database())?;
    let provisioner = Store::open(&home.database())?;
    let instance_id = writer.instance_id()?;
    let host = Host::new(home.clone(), &socket, instance_id.clone())?;

    let listener = startup::bind(port, &host.boot_id)?;
    let token = startup::new_token()?;
    let pid = std::process::id();
    let me = reconcile_proc::identity(&host.boot_id, pid)?
        .context("cannot read this process's own identity from /proc")?;
    startup::write_run(
        &home,
        &RunFile {
            pid,
            port,
            boot_id: host.boot_id.clone(),
            start_ticks: me.start_ticks,
            instance_id: instance_id.clone(),
            version: VERSION.to_owned(),
            token: token.clone(),
        },
    )?;
    tracing::info!(pid, port, instance_id = %instance_id, version = VERSION, home = %home.root().display(), "reconciled listening");

    let state = Arc::new(State::new(host, writer, reader, token, socket));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(serve(state, listener, provisioner));
    remove_run_file_if_ours(&home.run_file(), pid);
    tracing::info!(pid, "reconciled stopped");
    result
}

async fn serve(
    state: Arc<State>,
    listener: std::net::TcpListener,
    provisioner: Store,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    tokio::spawn(reconcile_then_sweep(state.clone()));
    tokio::spawn(stop_on_signal(state.clone()));
    tokio::spawn(crate::provision::run(state.clone(), provisioner));
    let app = api::router(state.clone());
    let stopping = state.clone();
    let server =
        axum::serve(listener, app).with_graceful_shutdown(async move { stopping.stopped().await });
    tokio::select! {
        result = server => result.context("the HTTP server failed")?,
        () = async { state.stopped().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::warn!("requests still open after the shutdown grace; exiting anyway");
        }
    }
    Ok(())
}

/// SIGTERM or SIGINT: a graceful exit that leaves every session running.
async fn stop_on_signal(state: Arc<State>) {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping, sessions keep running"),
        _ = int.recv() => tracing::info!("SIGINT: stopping, sessions keep running"),
    }
    state.stop();
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The boot reconcile (the daemon is ready once it finishes, whatever it found), then a sweep
/// every few seconds for sessions whose tmux session died.
async fn reconcile_then_sweep(state: Arc<State>) {
    state.emit(Event::Reconcile {
        kind: "boot".into(),
        report: None,
    });
    let s = state.clone();
    let report =
        tokio::task::spawn_blocking(move || reconcile_engine::reconcile(&s.writer(), &s.host))
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "the boot reconcile panicked; serving anyway");
                Report::default()
            });
    tracing::debug!("boot reconcile report:\n{report}");
    publish(&state, "boot", report);
    state.set_ready();

    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let mut ticks: u32 = 0;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = state.stopped() => return,
        }
        ticks = ticks.wrapping_add(1);
        let orphans = ticks.is_multiple_of(ORPHAN_SWEEP_EVERY);
        let s = state.clone();
        let swept = tokio::task::spawn_blocking(move || sweep(&s, orphans)).await;
        match swept {
            Ok(Some(report)) => publish(&state, "sweep", report),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "a sweep panicked"),
        }
    }
}

/// One sweep (and, when `orphans`, the slow orphan sweep); `Some` when it changed something or
/// warned. Sessions it changed are announced.
fn sweep(state: &State, orphans: bool) -> Option<Report> {
    if state.is_stopping() {
        return None;
    }
    let store = state.writer();
    let before = store
        .in_states(&[SessionState::Running, SessionState::Spawning])
        .unwrap_or_default();
    let report = reconcile_engine::sweep(&store, &state.host, orphans);
    if report.actions() == 0 && report.warning_count() == 0 {
        return None;
    }
    for old in before {
        if let Ok(Some(now)) = store.get(&old.id)
            && now.state != old.state
        {
            state.emit(Event::Session {
                session: SessionView::new(&now, &state.tmux_socket),
            });
        }
    }
    if report.pool.as_ref().is_some_and(|p| p.actions() > 0) {
        match store.windows() {
            Ok(windows) => {
                drop(store);
                for w in windows {
                    crate::windows::announce(state, &w.id);
                }
                state.provision_soon();
            }
            Err(e) => tracing::warn!(error = %e, "cannot read the windows to announce them"),
        }
    }
    tracing::debug!("sweep report:\n{report}");
    Some(report)
}

fn publish(state: &State, kind: &str, report: Report) {
    state.emit(Event::Reconcile {
        kind: kind.into(),
        report: Some(report.clone()),
    });
    state.set_report(ReportView {
        kind: kind.into(),
        finished_at_ms: now_ms(),
        report,
    });
}
