//! Crash tests: a child process runs a create or a reconcile and is killed with SIGKILL at a
//! failpoint; then reconcile runs to completion and the invariants hold.

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;

use reconcile_core::{Runtime, SessionState};
use reconcile_engine::{Host, NewSessionRequest, create_session, reconcile};
use reconcile_home::Home;
use reconcile_store::Store;

use crate::fixture::{Fixture, assert_settled, git};

const CHILD: &str = "RECONCILE_TEST_CHILD";

/// The child's side: does nothing unless started by `crash_at`.
#[test]
fn child() {
    let Ok(mode) = std::env::var(CHILD) else {
        return;
    };
    let home = Home::new(std::env::var("RC_HOME").unwrap());
    let store = Store::open(&home.database()).unwrap();
    let host = Host::new(
        home,
        &std::env::var("RC_SOCKET").unwrap(),
        store.instance_id().unwrap(),
    )
    .unwrap();
    match mode.as_str() {
        "create" => {
            let repo = std::env::var("RC_REPO").unwrap();
            let _ = create_session(
                &store,
                &host,
                NewSessionRequest {
                    repo: repo.into(),
                    name: None,
                    command: vec![
                        "sh".into(),
                        "-c".into(),
                        "echo dirty > agent.txt; exec sleep 600".into(),
                    ],
                    resume_token: None,
                    window: None,
                },
            );
        }
        "reconcile" => {
            reconcile(&store, &host);
        }
        other => panic!("unknown child mode {other}"),
    }
}

/// Run `mode` in a child process that dies at `failpoint`; assert it died there.
fn crash_at(f: &Fixture, mode: &str, failpoint: &str) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash::child", "--nocapture", "--test-threads=1"])
        .env(CHILD, mode)
        .env("RC_HOME", f.home.root())
        .env("RC_SOCKET", &f.socket.name)
        .env("RC_REPO", &f.repo)
        .env("RECONCILE_FAILPOINT", failpoint)
        .status()
        .unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the child must die by SIGKILL at {failpoint}: {status:?}"
    );
}

/// The invariants after a crash and a full reconcile.
fn assert_invariants(f: &Fixture, worktrees_before: &[std::path::PathBuf]) {
    let report = f.reconcile();
    assert_eq!(report.warning_count(), 0, "{report}");
    let rows = f.store.list().unwrap();
    // No leaked tmux session: every session on the socket belongs to a running row.
    for name in f.tmux_sessions() {
        let owner = rows.iter().find(|r| r.id.tmux_name() == name);
        assert!(
            owner.is_some_and(|r| r.state == SessionState::Running),
            "tmux session {name} leaked: {owner:?}"
        );
    }
    for row in &rows {
        assert_ne!(row.state, SessionState::Spawning, "{row:?}");
        if row.state == SessionState::Running {
            let Runtime::Tmux(h) = &row.runtime else {
                panic!()
            };
            assert!(h.is_recorded(), "{row:?}");
            assert!(
                f.tmux_sessions().contains(&row.id.tmux_name()),
                "running without tmux: {row:?}"
            );
        }
        // No lost work: a terminated row with a dirty worktree has its work in its ref.
        if row.state == SessionState::Terminated && row.worktree.join(".git").exists() {
            let dirty = !git(&row.worktree, "status --porcelain").is_empty();
            if dirty {
                let reference = row
                    .preserved_ref
                    .as_ref()
                    .expect("dirty work must be preserved");
                git(&f.repo, &format!("rev-parse --verify {reference}"));
            }
        }
    }
    // No deleted worktree.
    for wt in worktrees_before {
        assert!(wt.is_dir(), "worktree {} was deleted", wt.display());
    }
    assert_settled(f);
}

fn worktrees(home: &Path) -> Vec<std::path::PathBuf> {
    fs::read_dir(home.join("worktrees"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

#[test]
fn crash_during_create_at_every_step() {
    for failpoint in [
        "create.after_row",
        "create.after_worktree",
        "create.after_tmux",
    ] {
        let f = Fixture::new("crashcreate");
        crash_at(&f, "create", failpoint);
        let rows = f.store.list().unwrap();
        assert_eq!(rows.len(), 1, "{failpoint}");
        assert_eq!(rows[0].state, SessionState::Spawning, "{failpoint}");
        assert_invariants(&f, &worktrees(f.home.root()));
        let after = f.store.list().unwrap();
        let want = if failpoint == "create.after_tmux" {
            SessionState::Running
        } else {
            SessionState::Terminated
        };
        assert_eq!(after[0].state, want, "{failpoint}");
    }
}

#[test]
fn crash_during_the_live_pass() {
    for failpoint in ["terminate.before_preserve", "terminate.after_preserve"] {
        let f = Fixture::new("crashlive");
        let s = f.start("exec sleep 600", None);
        fs::write(s.worktree.join("work.txt"), "unsaved\n").unwrap();
        f.kill_tmux(&s);
        crash_at(&f, "reconcile", failpoint);
        assert_eq!(f.session(&s.id).state, SessionState::Running, "{failpoint}");
        assert_invariants(&f, &worktrees(f.home.root()));
        let reference = f.session(&s.id).preserved_ref.unwrap();
        assert_eq!(
            git(&f.repo, &format!("show {reference}:work.txt")),
            "unsaved\n"
        );
    }
}

#[test]
fn crash_during_the_reap_pass() {
    let f = Fixture::new("crashreap");
    let s = f.start("exec sleep 600", None);
    f.store.terminate(&s.id, "stopped", None, 1).unwrap();
    crash_at(&f, "reconcile", "reap.after_destroy");
    assert!(f.tmux_sessions().is_empty());
    assert_invariants(&f, &worktrees(f.home.root()));
}

#[test]
fn crash_during_the_restore_pass() {
    for failpoint in ["restore.after_intent", "restore.after_create"] {
        let f = Fixture::new("crashrestore");
        let s = f.start("exec sleep 600", None);
        f.store.mark_saved(&s.id, 1).unwrap();
        f.kill_tmux(&s);
        crash_at(&f, "reconcile", failpoint);
        assert_invariants(&f, &worktrees(f.home.root()));
        assert_eq!(f.session(&s.id).state, SessionState::Running, "{failpoint}");
        assert_eq!(
            f.tmux_sessions(),
            vec![s.id.tmux_name()],
            "restored exactly once at {failpoint}"
        );
    }
}
