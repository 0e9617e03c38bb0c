//! Crash chaos: scenarios that kill the real daemon (or a launcher) at a failpoint, and the check
//! of PRODUCT.md's invariants after `reconcile takeover`. Used by the deterministic suite
//! (`e2e/chaos.rs`) and the random mode (`examples/chaos.rs`).

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Child;

use crate::{DEADLINE, Env, count, ok, report_json};
use reconcile_testkit::{sh, wait_for};
use serde_json::Value;

/// Wait for the daemon started at a failpoint to die there, by SIGKILL.
pub fn died_at(mut daemon: Child, failpoint: &str) {
    let status = daemon.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "the daemon must die by SIGKILL at {failpoint}: {status}"
    );
}

/// Start a daemon that dies at `failpoint`, once it is ready (if it gets there).
pub fn start_at(env: &Env, failpoint: &str) -> Child {
    env.spawn_daemon_at(failpoint)
}

pub fn wait_ready_or_dead(env: &Env, daemon: &mut Child) {
    let http = reqwest::blocking::Client::new();
    wait_for("the failpoint daemon to be ready or dead", DEADLINE, || {
        daemon.try_wait().unwrap().is_some()
            || http
                .get(env.url("/readyz"))
                .send()
                .is_ok_and(|r| r.status() == 200)
    });
}

/// Every directory under the worktrees directory.
pub fn all_worktrees(env: &Env) -> Vec<PathBuf> {
    match fs::read_dir(env.home.join("worktrees")) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// The sessions' worktrees, which are never deleted. (A free slot's worktree is removed when its
/// window closes; the pool invariants check slots.)
pub fn worktrees(env: &Env) -> Vec<PathBuf> {
    all_worktrees(env)
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("slot-")
        })
        .collect()
}

/// Open a window of `slots` warm slots and wait until they are ready; its id.
pub fn open_window(env: &Env, slots: u32) -> String {
    let repo = env.repo().display().to_string();
    let n = slots.to_string();
    ok(env.cli(&["window", "open", "--repo", &repo, "--slots", &n, "--wait"]))
        .trim()
        .to_owned()
}

/// A session on a warm slot of `window`, with uncommitted work and a detached process.
pub fn window_session(env: &Env, window: &str) -> String {
    let id = ok(env.cli(&[
        "session",
        "new",
        "--window",
        window,
        "--",
        "sh",
        "-c",
        "echo wip > wip.txt; nohup sleep 600 >/dev/null 2>&1 & exec sleep 600",
    ]))
    .trim()
    .to_owned();
    let worktree = env.client().session(&id).unwrap().worktree;
    wait_for("the window session's work", DEADLINE, || {
        PathBuf::from(&worktree).join("wip.txt").exists()
    });
    id
}

/// LEAK-003's invariants: no lease held by a dead owner, no orphaned or half-made slot, no stray
/// worktree or slot branch. Waits first for the provisioner to refill every open window.
pub fn check_pools(env: &Env, what: &str) {
    let client = env.client();
    wait_for("every open window to be provisioned", DEADLINE, || {
        client.windows().unwrap().iter().all(|w| {
            w.state != reconcile_core::WindowState::Open
                || (w.provisioning == 0 && w.free() >= w.target as usize)
        })
    });
    let sessions = client.sessions().unwrap();
    let running = |id: &reconcile_core::SessionId| {
        sessions
            .iter()
            .any(|s| s.id == id.as_str() && s.state.as_str() == "running")
    };
    let store = reconcile_store::Store::open(&env.home.join("reconcile.db")).unwrap();
    let (leases, slots, windows) = (
        store.leases().unwrap(),
        store.slots().unwrap(),
        store.windows().unwrap(),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for lease in &leases {
        let live = match &lease.session {
            Some(session) => running(session),
            None => !lease.owner.is_empty() && lease.heartbeat_ms + lease.ttl_ms >= now,
        };
        assert!(live, "{what}: lease held by a dead owner: {lease:?}");
        assert!(
            slots.iter().any(|s| s.id == lease.slot),
            "{what}: lease on no slot: {lease:?}"
        );
    }
    for slot in &slots {
        use reconcile_core::SlotState::*;
        let window = windows.iter().find(|w| Some(&w.id) == slot.window.as_ref());
        match slot.state {
            Retired => continue,
            Provisioning => panic!("{what}: half-made slot left: {slot:?}"),
            Free | Leased | Used => {}
        }
        assert!(
            window.is_some_and(|w| w.state != reconcile_core::WindowState::Closed),
            "{what}: orphaned slot (its window is gone): {slot:?}"
        );
        assert!(
            slot.worktree.is_dir(),
            "{what}: slot without its worktree: {slot:?}"
        );
        if slot.state == Used {
            assert!(
                slot.session.as_ref().is_some_and(running),
                "{what}: a used slot whose session ended: {slot:?}"
            );
        }
        if slot.state == Leased {
            assert!(
                leases.iter().any(|l| l.slot == slot.id),
                "{what}: a leased slot without a lease: {slot:?}"
            );
        }
    }
    // Every worktree on disk, and every one git knows, is a session's or a recorded slot's.
    let recorded = |path: &std::path::Path| {
        sessions
            .iter()
            .any(|s| std::path::Path::new(&s.worktree) == path)
            || slots.iter().any(|s| s.worktree == path)
    };
    for dir in all_worktrees(env) {
        assert!(recorded(&dir), "{what}: stray worktree {}", dir.display());
    }
    let repo = env.repo();
    for line in sh(&repo, "git worktree list --porcelain").lines() {
        let Some(path) = line.strip_prefix("worktree ") else {
            continue;
        };
        let path = PathBuf::from(path);
        assert!(
            path == repo.canonicalize().unwrap() || path == repo || recorded(&path),
            "{what}: git lists a stray worktree {}",
            path.display()
        );
    }
    for branch in sh(
        &repo,
        "git for-each-ref --format='%(refname:short)' 'refs/heads/reconcile/slot-*'",
    )
    .lines()
    {
        assert!(
            slots.iter().any(|s| s.branch == branch),
            "{what}: stray slot branch {branch}"
        );
    }
}

pub fn new_session(env: &Env, script: &str) -> std::process::Output {
    let repo = env.repo().display().to_string();
    env.cli(&["session", "new", "--repo", &repo, "--", "sh", "-c", script])
}

/// A session with uncommitted work and a detached process.
pub fn busy_session(env: &Env) -> String {
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
pub fn recover_and_check(env: &Env, worktrees_before: &[PathBuf], what: &str) {
    let out = env.takeover();
    // Callers proved the crash (`died_at`); "reused" is right when a launcher died right after
    // spawning a daemon that then started fine.
    assert!(
        ["spawned", "replaced", "reused"].contains(&out["action"].as_str().unwrap_or("")),
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

    check_pools(env, what);

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
    let pool = crate::pool_actions(&report);
    assert_eq!(
        (actions, reaped, pool),
        (0, 0, 0),
        "{what}: the second reconcile acted: {report}"
    );
    assert_eq!(
        report["warnings"].as_array().unwrap().len(),
        0,
        "{what}: {report}"
    );
}
