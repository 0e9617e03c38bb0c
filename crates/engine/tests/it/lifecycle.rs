//! Stop and save-all against real tmux and git: the same classifier as reconcile decides.

use std::fs;

use reconcile_core::{SessionId, SessionState};
use reconcile_engine::{Error, save_all, stop_session};

use crate::fixture::{Fixture, assert_settled, git};

#[test]
fn stop_destroys_preserves_and_terminates_keeping_the_worktree() {
    let f = Fixture::new("stop");
    let s = f.start("exec sleep 600", None);
    let other = f.start("exec sleep 600", None);
    fs::write(s.worktree.join("wip.txt"), "work in progress\n").unwrap();

    let stopped = stop_session(&f.store, &f.host, &s.id).unwrap();
    assert_eq!(stopped.state, SessionState::Terminated);
    assert_eq!(stopped.end_reason.as_deref(), Some("stopped"));
    let reference = stopped.preserved_ref.clone().unwrap();
    assert_eq!(
        git(&f.repo, &format!("show {reference}:wip.txt")),
        "work in progress\n"
    );
    assert_eq!(
        f.tmux_sessions(),
        vec![other.id.tmux_name()],
        "only its tmux session is gone"
    );
    assert!(s.worktree.join("wip.txt").exists(), "the worktree stays");

    // Stopping again is harmless; an unknown id is a typed error.
    assert_eq!(
        stop_session(&f.store, &f.host, &s.id).unwrap().state,
        SessionState::Terminated
    );
    let unknown = SessionId::parse("nope").unwrap();
    assert!(matches!(
        stop_session(&f.store, &f.host, &unknown),
        Err(Error::NoSuchSession { .. })
    ));
    assert_settled(&f);
}

#[test]
fn stopping_a_session_whose_tmux_already_died_repairs_the_row() {
    let f = Fixture::new("stopdead");
    let s = f.start("exec sleep 600", None);
    f.kill_tmux(&s);
    let stopped = stop_session(&f.store, &f.host, &s.id).unwrap();
    assert_eq!(stopped.state, SessionState::Terminated);
    assert_eq!(
        stopped.end_reason.as_deref(),
        Some("its runtime had already ended")
    );
    assert_settled(&f);
}

#[test]
fn save_all_tears_down_and_the_next_reconcile_restores() {
    let f = Fixture::new("saveall");
    let a = f.start("exec sleep 600", None);
    let b = f.start("exec sleep 600", None);
    let failed = save_all(&f.store, &f.host).unwrap();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(f.session(&a.id).state, SessionState::Saved);
    assert_eq!(f.session(&b.id).state, SessionState::Saved);
    f.socket.kill_server();
    assert!(f.tmux_sessions().is_empty());

    let report = f.reconcile();
    assert_eq!(
        report.total(reconcile_core::Disposition::Restore),
        2,
        "{report}"
    );
    let mut names = f.tmux_sessions();
    names.sort();
    let mut want = vec![a.id.tmux_name(), b.id.tmux_name()];
    want.sort();
    assert_eq!(names, want);
    assert_settled(&f);
}

#[test]
fn save_all_tears_down_what_sessions_detached_too() {
    let f = Fixture::new("savedetached");
    let dir = f.path("leaky");
    fs::create_dir_all(&dir).unwrap();
    f.start(&reconcile_testkit::leaky_script(&dir), None);
    let boot = reconcile_proc::boot_id().unwrap();
    let procs: Vec<_> = reconcile_testkit::leaky_pids(&dir)
        .into_iter()
        .map(|(_, pid)| reconcile_proc::identity(&boot, pid).unwrap().unwrap())
        .collect();
    assert!(save_all(&f.store, &f.host).unwrap().is_empty());
    let alive = |id: &reconcile_core::ProcessIdentity| {
        reconcile_proc::identity(&boot, id.pid)
            .ok()
            .flatten()
            .as_ref()
            == Some(id)
    };
    reconcile_testkit::wait_for(
        "the detached processes to be gone",
        crate::fixture::LONG,
        || !procs.iter().any(alive),
    );
}
