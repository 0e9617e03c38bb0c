//! Orphan processes: everything a session started, however it detached, ends with the session;
//! nothing without its marker, with another instance's marker, or of a running session is touched.

use std::collections::BTreeMap;
use std::process::{Child, Command};
use std::time::Duration;

use reconcile_core::{ProcessIdentity, SessionState};
use reconcile_engine::stop_session;
use reconcile_testkit::wait_for;

use crate::fixture::{Fixture, LONG};

/// Start the leaky session and return the identities of what it left, by kind.
fn leaky_session(f: &Fixture) -> (reconcile_core::Session, BTreeMap<String, ProcessIdentity>) {
    let dir = f.path("leaky");
    std::fs::create_dir_all(&dir).unwrap();
    let session = f.start(&reconcile_testkit::leaky_script(&dir), None);
    let boot = reconcile_proc::boot_id().unwrap();
    let procs: BTreeMap<_, _> = reconcile_testkit::leaky_pids(&dir)
        .into_iter()
        .map(|(kind, pid)| {
            let identity = reconcile_proc::identity(&boot, pid)
                .unwrap()
                .unwrap_or_else(|| panic!("{kind} {pid} is not running"));
            (kind, identity)
        })
        .collect();
    assert_eq!(procs.len(), 5, "{procs:?}");
    (session, procs)
}

/// The leak check: which of `procs` still run (same identity).
fn leftovers(procs: &BTreeMap<String, ProcessIdentity>) -> Vec<String> {
    let boot = reconcile_proc::boot_id().unwrap();
    procs
        .iter()
        .filter(|(_, id)| {
            reconcile_proc::identity(&boot, id.pid)
                .ok()
                .flatten()
                .as_ref()
                == Some(*id)
        })
        .map(|(kind, _)| kind.clone())
        .collect()
}

fn wait_gone(procs: &BTreeMap<String, ProcessIdentity>) {
    wait_for("every orphan to be gone", LONG, || {
        leftovers(procs).is_empty()
    });
}

/// Processes this test starts itself and must find alive at the end.
struct Bystanders(Vec<Child>);

impl Bystanders {
    fn start(f: &Fixture, session: &reconcile_core::SessionId) -> Bystanders {
        let unmarked = Command::new("sleep")
            .arg("600")
            .env_remove("RECONCILE_OWNER")
            .spawn()
            .unwrap();
        let other_instance = Command::new("sleep")
            .arg("600")
            .env("RECONCILE_OWNER", format!("someone-else/{session}"))
            .spawn()
            .unwrap();
        let _ = f;
        Bystanders(vec![unmarked, other_instance])
    }

    fn assert_alive(&mut self) {
        for child in &mut self.0 {
            assert!(
                child.try_wait().unwrap().is_none(),
                "a bystander {} was signalled",
                child.id()
            );
        }
    }
}

impl Drop for Bystanders {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn stopping_a_session_ends_everything_it_started_and_nothing_else() {
    let f = Fixture::new("orph-stop");
    let (session, procs) = leaky_session(&f);
    let mut bystanders = Bystanders::start(&f, &session.id);
    // A marked process of a session still running.
    let keeper = f.start("nohup sleep 600 >/dev/null 2>&1 & exec sleep 600", None);

    let stopped = stop_session(&f.store, &f.host, &session.id).unwrap();
    assert_eq!(stopped.state, SessionState::Terminated);
    wait_gone(&procs);
    bystanders.assert_alive();
    assert_eq!(f.tmux_sessions(), vec![keeper.id.tmux_name()]);
    let report = f.reconcile();
    let keeper_processes = report.orphans.as_ref().unwrap().kept_running;
    assert!(
        keeper_processes >= 2,
        "the running session's processes are kept: {report}"
    );
    assert_eq!(report.orphans.unwrap().orphans, 0);
}

#[test]
fn the_leak_check_sees_what_reaping_would_have_stopped() {
    let mut f = Fixture::new("orph-proof");
    f.host.reap_orphans = false;
    let (session, procs) = leaky_session(&f);
    stop_session(&f.store, &f.host, &session.id).unwrap();
    // tmux is gone, and every detached process survived it.
    assert_eq!(leftovers(&procs), vec!["a", "b", "c", "d", "e"]);
    let report = f.reconcile();
    assert_eq!(
        report.orphans.as_ref().unwrap().orphans,
        procs.len() as u64,
        "{report}"
    );
    // Now with reaping: the same check comes back clean.
    f.host.reap_orphans = true;
    let report = f.reconcile();
    assert!(report.orphans.as_ref().unwrap().reaped() >= 5, "{report}");
    wait_gone(&procs);
}

#[test]
fn a_session_that_died_with_the_daemon_has_its_orphans_reaped_at_boot() {
    let f = Fixture::new("orph-boot");
    let (session, procs) = leaky_session(&f);
    let mut bystanders = Bystanders::start(&f, &session.id);
    // The daemon is gone (this process never ran a reconcile since), and so is the tmux server.
    f.socket.kill_server();
    assert_eq!(
        leftovers(&procs).len(),
        5,
        "the detached processes outlive tmux"
    );

    let report = f.reconcile();
    assert_eq!(f.session(&session.id).state, SessionState::Terminated);
    let orphans = report.orphans.clone().unwrap();
    assert!(orphans.reaped() >= 5 && orphans.killed >= 1, "{report}");
    wait_gone(&procs);
    bystanders.assert_alive();
    let again = f.reconcile();
    assert_eq!(again.actions(), 0, "{again}");
    let _ = Duration::ZERO;
}
