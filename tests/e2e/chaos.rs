//! The crash-chaos suite, deterministic part: for each failpoint, run the real daemon, let it
//! SIGKILL itself exactly there, run `reconcile takeover`, and check PRODUCT.md's invariants: no
//! leaked tmux session, no running process of an ended session, no lost uncommitted work, no
//! deleted worktree, exactly one daemon, and a second reconcile that takes no action.

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Child;

use reconcile_e2e::{DEADLINE, Env, count, ok, report_json};
use reconcile_testkit::{sh, wait_for};
use serde_json::Value;

/// Wait for the daemon started at a failpoint to die there, by SIGKILL.
fn died_at(mut daemon: Child, failpoint: &str) {
    let status = daemon.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the daemon must die by SIGKILL at {failpoint}: {status}"
    );
}

/// Start a daemon that dies at `failpoint`, once it is ready (if it gets there).
fn start_at(env: &Env, failpoint: &str) -> Child {
    env.spawn_daemon_at(failpoint)
}

fn wait_ready_or_dead(env: &Env, daemon: &mut Child) {
    let http = reqwest::blocking::Client::new();
    wait_for("the failpoint daemon to be ready or dead", DEADLINE, || {
        daemon.try_wait().unwrap().is_some()
            || http
                .get(env.url("/readyz"))
                .send()
                .is_ok_and(|r| r.status() == 200)
    });
}

fn worktrees(env: &Env) -> Vec<PathBuf> {
    match fs::read_dir(env.home.join("worktrees")) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

fn new_session(env: &Env, script: &str) -> std::process::Output {
    let repo = env.repo().display().to_string();
    env.cli(&["session", "new", "--repo", &repo, "--", "sh", "-c", script])
}

/// A session with uncommitted work and a detached process.
fn busy_session(env: &Env) -> String {
    let id = ok(new_session(
        env,
        "echo wip > wip.txt; nohup sleep 600 >/dev/null 2>&1 & exec sleep 600",
    ))
    .trim()
    .to_owned();
    let worktree = env.client().session(&id).unwrap().worktree;
    wait_for("the session's work", DEADLINE, || {
        PathBuf::from(&worktree).join("wip.txt").exists()
    });
    id
}

/// After a crash: take over, then check every invariant.
fn recover_and_check(env: &Env, worktrees_before: &[PathBuf], what: &str) {
    let out = env.takeover();
    assert!(
        out["action"] == "spawned" || out["action"] == "replaced",
        "{what}: {out}"
    );
    let client = env.client();
    let instance = client.health().unwrap().instance_id;
    let sessions = client.sessions().unwrap();

    // Exactly one daemon serves this home.
    let home = env.home.display().to_string();
    let daemons = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let exe =
                fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p.ends_with("reconciled"));
            let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            exe && environ
                .split(|b| *b == 0)
                .any(|v| v == format!("RECONCILE_HOME={home}").as_bytes())
        })
        .count();
    assert_eq!(daemons, 1, "{what}: one daemon");

    // No leaked tmux session, no row left spawning.
    for name in env.socket.sessions() {
        let owner = sessions
            .iter()
            .find(|s| s.tmux_session.as_deref() == Some(name.as_str()));
        assert!(
            owner.is_some_and(|s| s.state.as_str() == "running"),
            "{what}: tmux session {name} leaked"
        );
    }
    assert!(
        sessions.iter().all(|s| s.state.as_str() != "spawning"),
        "{what}: {sessions:?}"
    );

    // No running process of an ended session.
    let boot = reconcile_proc::boot_id().unwrap();
    for marked in reconcile_proc::scan_markers(&boot).unwrap().marked {
        let Some(session) = marked.marker.strip_prefix(&format!("{instance}/")) else {
            continue;
        };
        let state = sessions
            .iter()
            .find(|s| s.id == session)
            .map(|s| s.state.as_str());
        assert!(
            matches!(state, Some("running")),
            "{what}: process {} of session {session} ({state:?}) runs",
            marked.identity.pid
        );
    }

    // No lost work, no deleted worktree.
    for s in sessions.iter().filter(|s| s.state.as_str() == "terminated") {
        let worktree = PathBuf::from(&s.worktree);
        if worktree.join(".git").exists() && !sh(&worktree, "git status --porcelain").is_empty() {
            let reference = s
                .preserved_ref
                .as_ref()
                .unwrap_or_else(|| panic!("{what}: {} lost its work", s.id));
            sh(&env.repo(), &format!("git rev-parse --verify {reference}"));
        }
    }
    for wt in worktrees_before {
        assert!(wt.is_dir(), "{what}: worktree {} deleted", wt.display());
    }

    // A second reconcile takes no action.
    let again: Value =
        serde_json::from_str(&ok(env.cli(&["daemon", "restart", "--json"]))).unwrap();
    assert_eq!(again["action"], "replaced", "{what}");
    let report = report_json(env);
    let actions: u64 = [
        "mark_running",
        "preserve_and_terminate",
        "reap",
        "restore",
        "repair_row",
    ]
    .iter()
    .flat_map(|d| {
        ["alive", "confirmed_dead", "unknown", "no_handle", "remote"].map(|e| count(&report, e, d))
    })
    .sum();
    let reaped = report["orphans"]["terminated"].as_u64().unwrap_or(0)
        + report["orphans"]["killed"].as_u64().unwrap_or(0);
    assert_eq!(
        (actions, reaped),
        (0, 0),
        "{what}: the second reconcile acted: {report}"
    );
    assert_eq!(
        report["warnings"].as_array().unwrap().len(),
        0,
        "{what}: {report}"
    );
}

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
