//! The decision matrix end to end: each row state and evidence against real tmux, git, SQLite.

use std::fs;
use std::time::Duration;

use reconcile_core::{Disposition as D, Evidence as E, Runtime, SessionState, TmuxHandle};
use reconcile_store::NewSession;
use reconcile_testkit::{sh, wait_for};

use crate::fixture::{Fixture, LONG, assert_settled, git};

#[test]
fn a_running_session_whose_tmux_lives_is_adopted_untouched() {
    let f = Fixture::new("adopt");
    let s = f.start("exec sleep 600", None);
    let id_before = f.tmux_id(&s.id.tmux_name()).unwrap();

    let report = f.reconcile();
    assert_eq!(report.counted(E::Alive, D::Adopt), 1, "{report}");
    assert_eq!(report.actions(), 0, "{report}");
    assert_eq!(f.session(&s.id).state, SessionState::Running);
    assert_eq!(
        f.tmux_id(&s.id.tmux_name()),
        Some(id_before),
        "the tmux session is untouched"
    );
    assert_settled(&f);
}

#[test]
fn a_running_session_whose_tmux_died_is_preserved_and_terminated() {
    let f = Fixture::new("dead");
    let s = f.start("exec sleep 600", None);
    let wt = &s.worktree;
    fs::write(wt.join("README"), "hello\nedited by the agent\n").unwrap();
    fs::write(wt.join("notes.txt"), "new, untracked\n").unwrap();
    let status_before = git(wt, "status --porcelain");
    f.kill_tmux(&s);

    let report = f.reconcile();
    assert_eq!(
        report.counted(E::ConfirmedDead, D::PreserveAndTerminate),
        1,
        "{report}"
    );
    let after = f.session(&s.id);
    assert_eq!(after.state, SessionState::Terminated);
    let reference = after.preserved_ref.clone().expect("a preserved ref");
    assert_eq!(reference, format!("refs/reconcile/preserved/{}", s.id));
    assert_eq!(
        git(&f.repo, &format!("show {reference}:README")),
        "hello\nedited by the agent\n"
    );
    assert_eq!(
        git(&f.repo, &format!("show {reference}:notes.txt")),
        "new, untracked\n"
    );
    // The worktree is exactly as the agent left it.
    assert_eq!(git(wt, "status --porcelain"), status_before);
    assert_eq!(
        fs::read_to_string(wt.join("notes.txt")).unwrap(),
        "new, untracked\n"
    );
    assert_settled(&f);
}

#[test]
fn a_dead_session_with_a_clean_worktree_gets_no_ref() {
    let f = Fixture::new("clean");
    let s = f.start("exec sleep 600", None);
    f.kill_tmux(&s);
    let report = f.reconcile();
    assert_eq!(
        report.counted(E::ConfirmedDead, D::PreserveAndTerminate),
        1,
        "{report}"
    );
    let after = f.session(&s.id);
    assert_eq!(
        (after.state, after.preserved_ref),
        (SessionState::Terminated, None)
    );
    assert!(s.worktree.is_dir(), "the worktree stays");
    assert_settled(&f);
}

#[test]
fn a_terminated_session_whose_tmux_leaked_is_reaped() {
    let f = Fixture::new("reap");
    let keep = f.start("exec sleep 600", None);
    let leaked = f.start("exec sleep 600", None);
    // A stop that crashed after marking the row but before destroying tmux.
    f.store.terminate(&leaked.id, "stopped", None, 1).unwrap();

    let report = f.reconcile();
    assert_eq!(report.counted(E::Alive, D::Reap), 1, "{report}");
    assert_eq!(
        f.tmux_sessions(),
        vec![keep.id.tmux_name()],
        "only the leaked session is destroyed"
    );
    assert_eq!(f.session(&keep.id).state, SessionState::Running);
    assert_settled(&f);
}

#[test]
fn a_session_reusing_a_terminated_rows_name_is_not_ours_and_survives() {
    let f = Fixture::new("impostor");
    let s = f.start("exec sleep 600", None);
    f.kill_tmux(&s);
    f.reconcile();
    // Someone else now starts a session with the same name on the same socket.
    let out = f
        .socket
        .tmux(&["new-session", "-d", "-s", &s.id.tmux_name(), "sleep", "600"]);
    assert!(out.status.success());
    let report = f.reconcile();
    assert_eq!(report.actions(), 0, "{report}");
    assert_eq!(
        f.tmux_sessions(),
        vec![s.id.tmux_name()],
        "the impostor is not ours to destroy"
    );
}

#[test]
fn a_saved_session_is_restored_in_its_worktree_with_its_token() {
    let f = Fixture::new("restore");
    let out = f.path("restored");
    let script = format!(
        "{{ pwd; echo \"$RECONCILE_RESUME_TOKEN\"; echo \"$RECONCILE_OWNER\"; }} > {0}.tmp && mv {0}.tmp {0}; exec sleep 600",
        out.display()
    );
    let s = f.start(&script, Some("resume-me-42"));
    wait_for("the first launch", LONG, || out.exists());
    fs::remove_file(&out).unwrap();
    // A clean shutdown with "stop sessions": saved, then torn down.
    f.store.mark_saved(&s.id, 2).unwrap();
    f.kill_tmux(&s);

    let report = f.reconcile();
    assert_eq!(report.counted(E::ConfirmedDead, D::Restore), 1, "{report}");
    wait_for("the restored launch", LONG, || out.exists());
    let seen = fs::read_to_string(&out).unwrap();
    let want = format!(
        "{}\nresume-me-42\n{}/{}\n",
        s.worktree.display(),
        f.host.instance_id,
        s.id
    );
    assert_eq!(seen, want);
    let after = f.session(&s.id);
    assert_eq!(after.state, SessionState::Running);
    let Runtime::Tmux(handle) = &after.runtime else {
        panic!()
    };
    assert!(handle.is_recorded());
    assert_eq!(f.tmux_sessions(), vec![s.id.tmux_name()]);
    assert_settled(&f);
}

#[test]
fn a_saved_session_whose_tmux_still_runs_is_marked_running() {
    let f = Fixture::new("savedalive");
    let s = f.start("exec sleep 600", None);
    f.store.mark_saved(&s.id, 2).unwrap();
    let report = f.reconcile();
    assert_eq!(report.counted(E::Alive, D::MarkRunning), 1, "{report}");
    assert_eq!(f.session(&s.id).state, SessionState::Running);
    assert_eq!(f.tmux_sessions().len(), 1, "not launched twice");
    assert_settled(&f);
}

#[test]
fn with_tmux_unreachable_rows_are_preserved_and_counted_unknown() {
    let mut f = Fixture::new("unreach");
    let running = f.start("exec sleep 600", None);
    let leaked = f.start("exec sleep 600", None);
    f.store.terminate(&leaked.id, "stopped", None, 1).unwrap();
    let saved = f.start("exec sleep 600", None);
    f.store.mark_saved(&saved.id, 1).unwrap();
    f.host.tmux = f.host.tmux.clone().with_timeout(Duration::from_millis(300));

    // Our own tmux server, stopped: it accepts connections and never answers.
    let frozen = f.socket.freeze();
    let first = f.reconcile();
    let second = f.reconcile();
    drop(frozen);

    for report in [&first, &second] {
        assert_eq!(report.counted(E::Unknown, D::Preserve), 3, "{report}");
        assert_eq!(report.actions(), 0, "{report}");
        assert_eq!(
            report.warning_count(),
            0,
            "expected outcomes are counted, not warned:\n{report}"
        );
        // Every pass that probes tmux says it did not answer (the pool pass probes nothing).
        assert!(
            report
                .passes
                .iter()
                .filter(|p| p.pass != reconcile_core::Pass::Pool)
                .all(|p| !p.probe_answered),
            "{report}"
        );
    }
    assert_eq!(f.session(&running.id).state, SessionState::Running);
    assert_eq!(f.session(&leaked.id).state, SessionState::Terminated);
    assert_eq!(f.session(&saved.id).state, SessionState::Saved);
    assert_eq!(f.tmux_sessions().len(), 3, "nothing was destroyed");
}

#[test]
fn with_no_tmux_server_running_sessions_are_confirmed_dead() {
    let f = Fixture::new("noserver");
    let s = f.start("exec sleep 600", None);
    f.socket.kill_server();
    let report = f.reconcile();
    assert_eq!(
        report.counted(E::ConfirmedDead, D::PreserveAndTerminate),
        1,
        "{report}"
    );
    assert_eq!(f.session(&s.id).state, SessionState::Terminated);
    assert_settled(&f);
}

/// A crash mid-create leaves a `spawning` row: with its tmux session never started, the row
/// ends terminated and the worktree stays; with it started, the session is adopted.
#[test]
fn spawning_rows_left_by_a_crash_follow_the_matrix() {
    let f = Fixture::new("spawning");
    let insert = |id: &str| {
        let id = reconcile_core::SessionId::parse(id).unwrap();
        let worktree = f.home.worktrees().join(id.as_str());
        f.store
            .insert_spawning(
                &NewSession {
                    id: id.clone(),
                    name: None,
                    repo: f.repo.clone(),
                    branch: id.branch(),
                    worktree: worktree.clone(),
                    runtime: Runtime::Tmux(TmuxHandle::intent(id.tmux_name())),
                    command: vec!["sleep".into(), "600".into()],
                    resume_token: None,
                },
                1,
            )
            .unwrap();
        f.host
            .git
            .add_worktree(&f.repo, &id.branch(), &worktree)
            .unwrap();
        (id, worktree)
    };
    // Crashed before tmux: nothing runs.
    let (never, never_wt) = insert("never-started");
    fs::write(never_wt.join("half.txt"), "written before the crash\n").unwrap();
    // Crashed after tmux created the session, before the row said so.
    let (started, started_wt) = insert("started");
    let marker = reconcile_core::OwnerMarker {
        instance: f.host.instance_id.clone(),
        session: started.clone(),
    };
    f.host
        .tmux
        .create(&reconcile_tmux::Create {
            name: &started.tmux_name(),
            dir: &started_wt,
            command: &["sleep".into(), "600".into()],
            marker: &marker,
            resume_token: None,
        })
        .unwrap();
    // Someone else's session under the name of a third spawning row: not ours, never adopted.
    let (foreign, _) = insert("foreign");
    f.socket.tmux(&[
        "new-session",
        "-d",
        "-s",
        &foreign.tmux_name(),
        "sleep",
        "600",
    ]);

    let report = f.reconcile();
    assert_eq!(
        report.counted(E::ConfirmedDead, D::PreserveAndTerminate),
        2,
        "{report}"
    );
    assert_eq!(report.counted(E::Alive, D::MarkRunning), 1, "{report}");

    let n = f.session(&never);
    assert_eq!(n.state, SessionState::Terminated);
    assert_eq!(n.end_reason.as_deref(), Some("interrupted while starting"));
    assert!(never_wt.is_dir(), "the worktree is kept");
    let reference = n.preserved_ref.unwrap();
    assert_eq!(
        git(&f.repo, &format!("show {reference}:half.txt")),
        "written before the crash\n"
    );

    let s = f.session(&started);
    assert_eq!(s.state, SessionState::Running);
    let Runtime::Tmux(handle) = s.runtime else {
        panic!()
    };
    assert!(
        handle.is_recorded(),
        "the adopted handle is recorded: {handle:?}"
    );
    assert_eq!(f.session(&foreign).state, SessionState::Terminated);
    let mut names = f.tmux_sessions();
    names.sort();
    assert_eq!(
        names,
        vec![foreign.tmux_name(), started.tmux_name()],
        "the foreign session is untouched"
    );
    assert_settled(&f);
}

#[test]
fn a_spawning_row_whose_worktree_was_never_made_ends_cleanly() {
    let f = Fixture::new("nowt");
    let id = reconcile_core::SessionId::parse("no-worktree").unwrap();
    let half = f.home.worktrees().join(id.as_str());
    fs::create_dir_all(&half).unwrap();
    f.store
        .insert_spawning(
            &NewSession {
                id: id.clone(),
                name: None,
                repo: f.repo.clone(),
                branch: id.branch(),
                worktree: half.clone(),
                runtime: Runtime::Tmux(TmuxHandle::intent(id.tmux_name())),
                command: vec!["true".into()],
                resume_token: None,
            },
            1,
        )
        .unwrap();
    let report = f.reconcile();
    assert_eq!(
        report.counted(E::ConfirmedDead, D::PreserveAndTerminate),
        1,
        "{report}"
    );
    assert_eq!(report.warning_count(), 0, "{report}");
    assert!(
        half.is_dir(),
        "even a half-made worktree directory is never deleted"
    );
    assert_settled(&f);
}

#[test]
fn a_failure_on_one_row_is_recorded_and_the_pass_goes_on() {
    let f = Fixture::new("onefails");
    let broken = f.start("exec sleep 600", None);
    let fine = f.start("exec sleep 600", None);
    fs::write(broken.worktree.join("work.txt"), "precious\n").unwrap();
    fs::write(fine.worktree.join("work.txt"), "also precious\n").unwrap();
    // Corrupt the first worktree's link to its repository: capturing its work fails.
    let dotgit = broken.worktree.join(".git");
    let link = fs::read_to_string(&dotgit).unwrap();
    fs::write(&dotgit, "gitdir: /nonexistent\n").unwrap();
    f.kill_tmux(&broken);
    f.kill_tmux(&fine);

    let report = f.reconcile();
    assert_eq!(report.warning_count(), 1, "{report}");
    assert_eq!(
        report.warnings[0].code,
        reconcile_core::WarningCode::PreserveFailed
    );
    assert_eq!(
        report.counted(E::ConfirmedDead, D::PreserveAndTerminate),
        1,
        "{report}"
    );
    assert_eq!(
        f.session(&broken.id).state,
        SessionState::Running,
        "not terminated without its work saved"
    );
    assert_eq!(f.session(&fine.id).state, SessionState::Terminated);

    // Repaired, the next reconcile captures the work.
    fs::write(&dotgit, link).unwrap();
    let report = f.reconcile();
    assert_eq!(
        report.counted(E::ConfirmedDead, D::PreserveAndTerminate),
        1,
        "{report}"
    );
    let reference = f.session(&broken.id).preserved_ref.unwrap();
    assert_eq!(
        sh(&f.repo, &format!("git show {reference}:work.txt")),
        "precious\n"
    );
    assert_settled(&f);
}
