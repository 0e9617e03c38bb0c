//! The crash-chaos suite, deterministic part: for each failpoint, run the real daemon (or the
//! launcher), let it SIGKILL itself exactly there, run `reconcile takeover`, and check
//! PRODUCT.md's invariants: no leaked tmux session, no running process of an ended session, no
//! lost uncommitted work, no deleted worktree, exactly one daemon, and a second reconcile that
//! takes no action.

use reconcile_e2e::chaos::*;
use reconcile_e2e::{Env, ok};

#[test]
fn crash_during_create() {
    for failpoint in [
        "create.after_row",
        "create.after_worktree",
        "create.after_tmux",
    ] {
        let env = Env::new("chaos-create");
        let mut daemon = start_at(&env, failpoint);
        wait_ready_or_dead(&env, &mut daemon);
        let out = new_session(&env, "echo wip > wip.txt; exec sleep 600");
        assert!(
            !out.status.success(),
            "{failpoint}: the create must not report success"
        );
        died_at(daemon, failpoint);
        recover_and_check(&env, &worktrees(&env), failpoint);
    }
}

#[test]
fn crash_during_stop() {
    for failpoint in [
        "stop.after_destroy",
        "terminate.before_preserve",
        "terminate.after_preserve",
    ] {
        let mut env = Env::new("chaos-stop");
        env.start();
        let id = busy_session(&env);
        let _keep = busy_session(&env);
        env.sigterm();
        let mut daemon = start_at(&env, failpoint);
        wait_ready_or_dead(&env, &mut daemon);
        let out = env.cli(&["session", "stop", &id]);
        assert!(
            !out.status.success(),
            "{failpoint}: the stop must not report success"
        );
        died_at(daemon, failpoint);
        let before = worktrees(&env);
        recover_and_check(&env, &before, failpoint);
        let stopped = env.client().session(&id).unwrap();
        assert_eq!(stopped.state.as_str(), "terminated", "{failpoint}");
    }
}

#[test]
fn crash_during_stop_with_sessions() {
    for failpoint in ["save.after_mark", "save.after_teardown"] {
        let mut env = Env::new("chaos-save");
        env.start();
        busy_session(&env);
        busy_session(&env);
        env.sigterm();
        let mut daemon = start_at(&env, failpoint);
        wait_ready_or_dead(&env, &mut daemon);
        let _ = env.cli(&["daemon", "stop", "--stop-sessions"]);
        died_at(daemon, failpoint);
        let before = worktrees(&env);
        recover_and_check(&env, &before, failpoint);
        let sessions = env.client().sessions().unwrap();
        assert!(
            sessions.iter().all(|s| s.state.as_str() == "running"),
            "{failpoint}: restored or adopted: {sessions:?}"
        );
    }
}

#[test]
fn crash_during_the_boot_reconcile() {
    for failpoint in [
        "terminate.before_preserve",
        "terminate.after_preserve",
        "reap.after_destroy",
        "restore.after_intent",
        "restore.after_create",
        "orphans.before_scan",
    ] {
        let mut env = Env::new("chaos-boot");
        env.start();
        let dead = busy_session(&env);
        // Terminated rows always had their work captured first; this one has none to capture.
        let leaked = ok(new_session(
            &env,
            "nohup sleep 600 >/dev/null 2>&1 & exec sleep 600",
        ))
        .trim()
        .to_owned();
        let saved = busy_session(&env);
        env.kill9();
        // What each pass will find: a dead session, a terminated row whose tmux leaked, a saved one.
        env.socket.kill_session(&format!("rc-{dead}"));
        let store = reconcile_store::Store::open(&env.home.join("reconcile.db")).unwrap();
        store
            .terminate(
                &reconcile_core::SessionId::parse(&leaked).unwrap(),
                "stopped",
                None,
                1,
            )
            .unwrap();
        store
            .mark_saved(&reconcile_core::SessionId::parse(&saved).unwrap(), 1)
            .unwrap();
        drop(store);
        env.socket.kill_session(&format!("rc-{saved}"));

        let mut daemon = start_at(&env, failpoint);
        wait_ready_or_dead(&env, &mut daemon);
        died_at(daemon, failpoint);
        let before = worktrees(&env);
        recover_and_check(&env, &before, failpoint);
        let client = env.client();
        assert_eq!(
            client.session(&dead).unwrap().state.as_str(),
            "terminated",
            "{failpoint}"
        );
        assert_eq!(
            client.session(&leaked).unwrap().state.as_str(),
            "terminated",
            "{failpoint}"
        );
        assert_eq!(
            client.session(&saved).unwrap().state.as_str(),
            "running",
            "{failpoint}"
        );
    }
}

#[test]
fn crash_during_takeover() {
    for failpoint in [
        "takeover.after_lock",
        "takeover.after_stop",
        "takeover.after_spawn",
    ] {
        let mut env = Env::new("chaos-takeover");
        env.start();
        busy_session(&env);
        // A wedged daemon to replace, so the takeover goes through every step.
        let old = env.daemon_identity().unwrap();
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(old.pid as i32).unwrap(),
            rustix::process::Signal::STOP,
        )
        .unwrap();
        let launcher = env
            .command(&reconcile_e2e::bin("reconcile"))
            .args(["takeover", "--json"])
            .env("RECONCILE_FAILPOINT", failpoint)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        died_at(launcher, failpoint);
        // The test's own daemon child is whatever the launchers left; take over from here.
        env.forget_daemon();
        let before = worktrees(&env);
        recover_and_check(&env, &before, failpoint);
        assert!(
            !reconcile_e2e::alive(&old),
            "{failpoint}: the wedged daemon is gone"
        );
    }
}

#[test]
fn crash_during_provisioning() {
    for failpoint in ["pool.after_row", "pool.after_worktree"] {
        let mut env = Env::new("chaos-provision");
        env.start();
        // A window with a session, so the pool holds more than the slot being made.
        let window = open_window(&env, 1);
        window_session(&env, &window);
        env.sigterm();
        let mut daemon = start_at(&env, failpoint);
        wait_ready_or_dead(&env, &mut daemon);
        let repo = env.repo().display().to_string();
        ok(env.cli(&["window", "open", "--repo", &repo, "--slots", "2"]));
        died_at(daemon, failpoint);
        let before = worktrees(&env);
        recover_and_check(&env, &before, failpoint);
        let report = reconcile_e2e::report_json(&env);
        assert_eq!(report["kind"], "boot", "{failpoint}");
    }
}

#[test]
fn crash_during_the_pool_pass_and_window_close() {
    for (failpoint, close) in [
        ("pool.after_leases", false),
        ("window.after_closing", true),
        ("pool.after_remove_worktree", true),
    ] {
        let mut env = Env::new("chaos-close");
        env.start();
        let window = open_window(&env, 2);
        let session = window_session(&env, &window);
        let lease = env
            .client()
            .acquire_lease(
                &window,
                &reconcile_api::AcquireLease {
                    owner: "chaos".into(),
                    ttl_ms: Some(600_000),
                },
            )
            .unwrap();
        env.sigterm();
        let mut daemon = start_at(&env, failpoint);
        wait_ready_or_dead(&env, &mut daemon);
        if close {
            assert!(
                !env.cli(&["window", "close", &window]).status.success(),
                "{failpoint}: the close must not report success"
            );
        }
        died_at(daemon, failpoint);
        let before = worktrees(&env);
        recover_and_check(&env, &before, failpoint);
        let client = env.client();
        assert_eq!(
            client.session(&session).unwrap().state.as_str(),
            "running",
            "{failpoint}"
        );
        let w = client.window(&window).unwrap();
        if close {
            // The close went on after the crash: only the running session's slot is left.
            assert_eq!(w.state.as_str(), "closing", "{failpoint}");
            assert_eq!(w.slots.len(), 1, "{failpoint}: {w:?}");
            assert!(client.renew_lease(&lease.id).is_err(), "{failpoint}");
        } else {
            assert!(client.renew_lease(&lease.id).is_ok(), "{failpoint}");
        }
    }
}
