//! The daemon as the launcher keeps it: the first takeover (its progress shown in the window),
//! then supervision for as long as the app runs, and the daemon's event stream forwarded to the
//! window. Everything here runs off the UI thread.

use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use reconcile_api::{Client, read_run_file};
use reconcile_takeover::{Config, Progress, Supervised};
use serde::Serialize;
use tauri::{AppHandle, Emitter, Manager};

/// Where the daemon is, as the window and the tray show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Probing,
    Replacing,
    Spawning,
    Reconciling,
    Ready,
    Restarting,
    /// It kept crashing; supervision stopped. `log` has its last lines.
    CrashLoop,
    /// The takeover failed (a foreign port holder, say); `message` says why.
    Failed,
}

/// The daemon's status, sent to the window on every change (event `status`).
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub phase: Phase,
    pub pid: Option<u32>,
    pub port: u16,
    pub version: Option<String>,
    /// When the daemon process started (Unix ms), for its uptime.
    pub started_at_ms: Option<i64>,
    pub message: Option<String>,
    pub log: Option<String>,
    /// Sessions running, for the tray's status line.
    pub running: Option<usize>,
}

/// What the app's threads share.
pub struct Launcher {
    pub config: Config,
    status: Mutex<Status>,
    /// Set on quit: supervision and the event stream end.
    pub quitting: AtomicBool,
    /// Bumped whenever a new daemon is ready, so the event stream of the old one ends.
    generation: AtomicU64,
    /// Whether the keeper thread (takeover, then supervision) runs.
    pub keeping: AtomicBool,
}

impl Launcher {
    pub fn new(config: Config) -> Launcher {
        let port = config.port;
        Launcher {
            config,
            status: Mutex::new(Status {
                phase: Phase::Probing,
                pid: None,
                port,
                version: None,
                started_at_ms: None,
                message: None,
                log: None,
                running: None,
            }),
            quitting: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            keeping: AtomicBool::new(false),
        }
    }

    pub fn status(&self) -> Status {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A client of the daemon the run-file names now.
    pub fn client(&self) -> Result<Client, reconcile_api::ClientError> {
        Client::from_home(&self.config.home)
    }
}

/// Change the status and tell the window and the tray.
pub fn update(app: &AppHandle, change: impl FnOnce(&mut Status)) {
    let launcher = app.state::<Launcher>();
    let status = {
        let mut status = launcher.lock();
        change(&mut status);
        status.clone()
    };
    crate::tray::show_status(app, &status);
    if let Err(e) = app.emit("status", &status) {
        tracing::debug!(error = %e, "cannot send the status to the window");
    }
}

/// Take the daemon over, then supervise it until the app quits; nothing when that already runs.
pub fn start(app: AppHandle) {
    if app.state::<Launcher>().keeping.swap(true, Ordering::SeqCst) {
        return;
    }
    std::thread::Builder::new()
        .name("daemon".into())
        .spawn(move || {
            keep(&app);
            app.state::<Launcher>()
                .keeping
                .store(false, Ordering::SeqCst);
        })
        .expect("a thread can be started");
}

fn keep(app: &AppHandle) {
    let launcher = app.state::<Launcher>();
    let first = reconcile_takeover::takeover(&launcher.config, &mut |p| progress(app, &p));
    match first {
        Ok(outcome) => ready(app, outcome.pid),
        Err(e) => {
            failed(app, e.to_string());
            if matches!(e, reconcile_takeover::Error::Refused(_)) {
                return;
            }
        }
    }
    let quitting = || launcher.quitting.load(Ordering::SeqCst);
    let supervised =
        reconcile_takeover::supervise(&launcher.config, &quitting, &mut |event| match event {
            Supervised::Running { pid } => ready(app, pid),
            Supervised::Exited { pid, unexpected } => {
                tracing::info!(pid, unexpected, "the daemon exited");
                update(app, |s| {
                    s.phase = Phase::Restarting;
                    s.message = Some(format!("daemon {pid} exited; starting a new one"));
                });
            }
            Supervised::Restarting { in_ms } => update(app, |s| {
                s.phase = Phase::Restarting;
                s.message = Some(format!("restarting the daemon in {in_ms} ms"));
            }),
            Supervised::Failed { message } => failed(app, message),
            Supervised::CrashLoop { log } => update(app, |s| {
                s.phase = Phase::CrashLoop;
                s.pid = None;
                s.message = Some(
                    "the daemon keeps crashing; supervision stopped. Its last log lines are below."
                        .into(),
                );
                s.log = Some(log);
            }),
        });
    match supervised {
        // Already shown, with the daemon's last log lines.
        Ok(()) | Err(reconcile_takeover::Error::CrashLoop { .. }) => {}
        Err(e) => failed(app, e.to_string()),
    }
}

fn progress(app: &AppHandle, p: &Progress) {
    let phase = match p {
        Progress::Probing => Phase::Probing,
        Progress::Replacing { .. } => Phase::Replacing,
        Progress::Spawning => Phase::Spawning,
        Progress::Reconciling { .. } => Phase::Reconciling,
    };
    let message = reconcile_takeover::describe(p);
    update(app, |s| {
        s.phase = phase;
        s.message = Some(message);
    });
}

fn failed(app: &AppHandle, message: String) {
    tracing::warn!(message = %message, "takeover failed");
    update(app, |s| {
        s.phase = Phase::Failed;
        s.message = Some(message);
    });
}

/// A daemon is ready: show it, and follow its event stream.
pub fn ready(app: &AppHandle, pid: u32) {
    let launcher = app.state::<Launcher>();
    let run = read_run_file(&launcher.config.home.run_file()).ok();
    let started_at_ms = run
        .as_ref()
        .and_then(|r| reconcile_proc_started(r.start_ticks));
    let running = count_running(&launcher);
    update(app, |s| {
        s.phase = Phase::Ready;
        s.pid = Some(pid);
        s.version = run.as_ref().map(|r| r.version.clone());
        s.started_at_ms = started_at_ms;
        s.message = None;
        s.log = None;
        s.running = running;
    });
    let generation = launcher.generation.fetch_add(1, Ordering::SeqCst) + 1;
    let app = app.clone();
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || forward_events(&app, generation))
        .expect("a thread can be started");
}

fn reconcile_proc_started(start_ticks: u64) -> Option<i64> {
    reconcile_proc::started_at_ms(start_ticks).ok()
}

fn count_running(launcher: &Launcher) -> Option<usize> {
    let sessions = launcher.client().ok()?.sessions().ok()?;
    Some(
        sessions
            .iter()
            .filter(|s| s.state == reconcile_core::SessionState::Running)
            .count(),
    )
}

/// Forward the daemon's server-sent events to the window (event `daemon-event`, the JSON the
/// daemon sent) until the app quits or another daemon takes over. Reconnects while the daemon
/// is briefly away.
fn forward_events(app: &AppHandle, generation: u64) {
    let launcher = app.state::<Launcher>();
    let current = || {
        !launcher.quitting.load(Ordering::SeqCst)
            && launcher.generation.load(Ordering::SeqCst) == generation
    };
    let http = reqwest::blocking::Client::builder()
        .connect_timeout(Duration::from_secs(2))
        .timeout(None)
        .no_proxy()
        .build()
        .expect("a client without TLS or proxies always builds");
    while current() {
        let Ok(run) = read_run_file(&launcher.config.home.run_file()) else {
            std::thread::park_timeout(Duration::from_millis(500));
            continue;
        };
        let response = http
            .get(format!("http://127.0.0.1:{}/v1/events", run.port))
            .bearer_auth(&run.token)
            .send();
        let Ok(response) = response else {
            std::thread::park_timeout(Duration::from_millis(500));
            continue;
        };
        let mut lines = BufReader::new(response).lines();
        while current() {
            let Some(Ok(line)) = lines.next() else { break };
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            let Ok(event) = serde_json::from_str::<serde_json::Value>(data.trim()) else {
                continue;
            };
            if event["type"] == "session" {
                let running = count_running(&launcher);
                update(app, |s| s.running = running);
            }
            if let Err(e) = app.emit("daemon-event", &event) {
                tracing::debug!(error = %e, "cannot send an event to the window");
            }
        }
    }
}
