//! Benchmark: reconcile over 100 live tmux sessions and 10,000 terminated rows, against a
//! baseline in the same run that probes each row with its own `tmux has-session` (what other
//! tools do). Prints rows per second and child processes started, and their ratio.
//!
//! Run: `cargo bench -p reconcile-engine --bench reconcile`

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use reconcile_core::{Runtime, SessionId, TmuxHandle, TmuxProbe};
use reconcile_engine::{Host, reconcile};
use reconcile_home::Home;
use reconcile_store::{NewSession, Store};
use reconcile_testkit::TmuxSocket;

const LIVE: usize = 100;
const TERMINATED: usize = 10_000;
const ROUNDS: u32 = 5;

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let socket = TmuxSocket::new("bench");
    let home = Home::new(dir.path().join("home"));
    home.ensure().unwrap();
    let mut store = Store::open(&home.database()).unwrap();
    let host = Host::new(home, &socket.name, store.instance_id().unwrap()).unwrap();
    let rows = seed(&mut store, &host, &socket);

    // Reconcile: one batched probe per pass.
    let children = host.children.get();
    let started = Instant::now();
    for _ in 0..ROUNDS {
        let report = reconcile(&store, &host);
        assert_eq!(
            report.actions(),
            0,
            "the bench state must be settled:\n{report}"
        );
    }
    let ours = started.elapsed() / ROUNDS;
    let our_children = (host.children.get() - children) / u64::from(ROUNDS);

    // Baseline: one `tmux has-session` per row, once over every row.
    let started = Instant::now();
    let mut alive = 0;
    for name in &rows {
        let status = Command::new("tmux")
            .args(["-L", &socket.name, "has-session", "-t", &format!("={name}")])
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        alive += usize::from(status.success());
    }
    let baseline = started.elapsed();
    assert_eq!(alive, LIVE);

    let n = rows.len() as f64;
    let rate = |d: Duration| n / d.as_secs_f64();
    println!(
        "reconcile bench: {LIVE} live tmux sessions, {TERMINATED} terminated rows ({} rows)",
        rows.len()
    );
    println!("| method | one reconcile over all rows | rows/s | child processes |");
    println!("|---|---:|---:|---:|");
    println!(
        "| reconcile (batched probe) | {:.1} ms | {:.0} | {our_children} |",
        ours.as_secs_f64() * 1e3,
        rate(ours)
    );
    println!(
        "| baseline (`tmux has-session` per row) | {:.1} ms | {:.0} | {} |",
        baseline.as_secs_f64() * 1e3,
        rate(baseline),
        rows.len()
    );
    println!(
        "ratio: reconcile is {:.1}x the baseline's rows/s and starts {:.0}x fewer child processes",
        baseline.as_secs_f64() / ours.as_secs_f64(),
        rows.len() as f64 / our_children.max(1) as f64
    );
}

/// 100 live sessions with running rows and 10,000 terminated rows; returns every tmux name.
fn seed(store: &mut Store, host: &Host, socket: &TmuxSocket) -> Vec<String> {
    let live: Vec<SessionId> = (0..LIVE)
        .map(|i| SessionId::parse(&format!("live-{i}")).unwrap())
        .collect();
    let mut args: Vec<String> = Vec::new();
    for id in &live {
        if !args.is_empty() {
            args.push(";".into());
        }
        args.extend(
            ["new-session", "-d", "-s", &id.tmux_name(), "sleep", "3600"].map(String::from),
        );
    }
    let out = socket.tmux(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let TmuxProbe::Listing(listing) = host.tmux.probe() else {
        panic!("no tmux listing")
    };
    let row = |id: &SessionId, runtime| NewSession {
        id: id.clone(),
        name: None,
        repo: PathBuf::from("/nonexistent/repo"),
        branch: id.branch(),
        worktree: PathBuf::from("/nonexistent/worktree").join(id.as_str()),
        runtime,
        command: vec!["sleep".into(), "3600".into()],
        resume_token: None,
    };
    let mut names = Vec::new();
    store
        .transaction(|tx| {
            for id in &live {
                let found = listing.session(&id.tmux_name()).unwrap();
                let handle = Runtime::Tmux(TmuxHandle {
                    name: id.tmux_name(),
                    id: Some(found.id.clone()),
                    server: listing.server.clone(),
                    pane: found.pane.clone(),
                });
                tx.insert_spawning(&row(id, handle.clone()), 1)?;
                tx.mark_running(id, &handle, 1)?;
                names.push(id.tmux_name());
            }
            for i in 0..TERMINATED {
                let id = SessionId::parse(&format!("done-{i}")).unwrap();
                let handle = Runtime::Tmux(TmuxHandle {
                    name: id.tmux_name(),
                    id: Some(format!("${}", 100_000 + i)),
                    server: listing.server.clone(),
                    pane: None,
                });
                tx.insert_spawning(&row(&id, handle), 1)?;
                tx.terminate(&id, "stopped", None, 1)?;
                names.push(id.tmux_name());
            }
            Ok(())
        })
        .unwrap();
    names
}
