//! The LEAK-003 battery: one story against the real binaries, each step a gate, printed as
//! `N/N` like the seed's `provision.sh`. Run alone with `scripts/battery`; `cargo test` (and so
//! the README's test command) runs it too. A failed step prints why and the battery exits 1.
//!
//! The steps:
//! 1. the binaries build;
//! 2. a window provisions N of N slots;
//! 3. a planted unowned lease and a planted stale lease are reaped at the next start while a
//!    healthy one is kept;
//! 4. the leftover slot of a crashed window (and one never recorded) is reaped while the live
//!    window's slots are kept;
//! 5. a second run changes nothing;
//! 6. closing a window cleans its pool;
//! 7. SIGKILL of the daemon during provisioning, then a new start: no half-made slot, no stray
//!    worktree.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::Command;

use reconcile_api::AcquireLease;
use reconcile_core::{LeaseId, SlotState, WindowState};
use reconcile_e2e::chaos::{
    all_worktrees, check_pools, died_at, open_window, start_at, wait_ready_or_dead,
};
use reconcile_e2e::{DEADLINE, Env, bin, ok, pool_actions, report_json};
use reconcile_store::Store;
use reconcile_testkit::{sh, wait_for};
use serde_json::Value;

const SLOTS: u32 = 3;

/// One step of the battery: its name and its check.
type Check = (&'static str, fn(&mut Option<Story>));

struct Story {
    env: Env,
    /// The live window, and the one that crashes.
    live: String,
    healthy_lease: Option<String>,
}

fn main() {
    let checks: [Check; 7] = [
        ("the binaries build", binaries_build),
        ("a window provisions N of N slots", provisions),
        (
            "a planted unowned and a planted stale lease are reaped, a healthy one kept",
            leases_reaped,
        ),
        (
            "the leftover slot of a crashed window is reaped, the live window's kept",
            leftover_slots_reaped,
        ),
        ("a second run changes nothing", second_run_changes_nothing),
        ("closing a window cleans its pool", close_cleans),
        (
            "SIGKILL during provisioning, then a new start: no half-made slot, no stray worktree",
            crash_while_provisioning,
        ),
    ];
    let mut story = None;
    let mut passed = 0;
    for (i, (name, check)) in checks.iter().enumerate() {
        let n = i + 1;
        match catch_unwind(AssertUnwindSafe(|| check(&mut story))) {
            Ok(()) => {
                passed += 1;
                println!("ok   {n}. {name}");
            }
            Err(_) => println!("FAIL {n}. {name} (the panic above says why)"),
        }
    }
    println!("battery: {passed}/{} passed", checks.len());
    drop(story);
    if passed != checks.len() {
        std::process::exit(1);
    }
}

fn story(story: &mut Option<Story>) -> &mut Story {
    story.as_mut().expect("an earlier step failed to set up")
}

fn binaries_build(_: &mut Option<Story>) {
    for name in ["reconciled", "reconcile"] {
        let out = Command::new(bin(name)).arg("--version").output().unwrap();
        assert!(out.status.success(), "{name} --version: {out:?}");
    }
}

fn provisions(story: &mut Option<Story>) {
    let mut env = Env::new("battery");
    env.start();
    let live = open_window(&env, SLOTS);
    let window = env.client().window(&live).unwrap();
    assert_eq!(window.free(), SLOTS as usize, "{window:?}");
    let head = sh(&env.repo(), "git rev-parse HEAD");
    for slot in &window.slots {
        let wt = PathBuf::from(&slot.worktree);
        assert_eq!(sh(&wt, "git rev-parse HEAD"), head, "{slot:?}");
        assert_eq!(sh(&wt, "git status --porcelain"), "", "{slot:?}");
        assert_eq!(
            sh(&wt, "git branch --show-current").trim(),
            slot.branch,
            "{slot:?}"
        );
    }
    *story = Some(Story {
        env,
        live,
        healthy_lease: None,
    });
}

fn leases_reaped(story: &mut Option<Story>) {
    let s = self::story(story);
    let client = s.env.client();
    let lease = |owner: &str| {
        client
            .acquire_lease(
                &s.live,
                &AcquireLease {
                    owner: owner.into(),
                    ttl_ms: Some(600_000),
                },
            )
            .unwrap()
    };
    let (unowned, stale, healthy) = (lease("a"), lease("b"), lease("c"));
    // The daemon crashes; what its owners left is planted in the store.
    s.env.kill9();
    let store = Store::open(&s.env.home.join("reconcile.db")).unwrap();
    let id = |l: &reconcile_api::LeaseView| LeaseId::parse(&l.id).unwrap();
    let mut orphan = store.lease(&id(&unowned)).unwrap().unwrap();
    orphan.owner = String::new();
    store.delete_lease(&orphan.id).unwrap();
    store.insert_lease(&orphan).unwrap();
    store
        .renew_lease(&id(&stale), stale.heartbeat_ms - 3_600_000)
        .unwrap();
    drop(store);

    s.env.takeover();
    let report = report_json(&s.env);
    assert_eq!(report["pool"]["leases_reaped_unowned"], 1, "{report}");
    assert_eq!(report["pool"]["leases_reaped_stale"], 1, "{report}");
    assert_eq!(report["pool"]["leases_kept"], 1, "{report}");
    let client = s.env.client();
    let window = client.window(&s.live).unwrap();
    let state_of = |slot: &str| window.slots.iter().find(|x| x.id == slot).map(|x| x.state);
    assert_eq!(state_of(&unowned.slot), Some(SlotState::Free), "{window:?}");
    assert_eq!(state_of(&stale.slot), Some(SlotState::Free), "{window:?}");
    assert_eq!(
        state_of(&healthy.slot),
        Some(SlotState::Leased),
        "{window:?}"
    );
    assert!(
        client.renew_lease(&healthy.id).is_ok(),
        "the healthy owner renews"
    );
    assert!(
        client.renew_lease(&stale.id).is_err(),
        "a reaped lease is gone"
    );
    s.healthy_lease = Some(healthy.id);
}

fn leftover_slots_reaped(story: &mut Option<Story>) {
    let s = self::story(story);
    let crashed = open_window(&s.env, 1);
    let crashed_slots: Vec<PathBuf> = s
        .env
        .client()
        .window(&crashed)
        .unwrap()
        .slots
        .iter()
        .map(|x| PathBuf::from(&x.worktree))
        .collect();
    let live_before = s.env.client().window(&s.live).unwrap();
    // The daemon crashes, and the crashed window's state is gone; a slot whose window was never
    // recorded is left too.
    s.env.stop_recorded_daemon(std::time::Duration::ZERO);
    let db = s.env.home.join("reconcile.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("DELETE FROM windows WHERE id = ?1", [&crashed])
        .unwrap();
    let never = s.env.home.join("worktrees/slot-never");
    sh(
        &s.env.repo(),
        &format!(
            "git worktree add -q -b reconcile/slot-never {} HEAD",
            never.display()
        ),
    );
    let head = sh(&s.env.repo(), "git rev-parse HEAD");
    conn.execute(
        "INSERT INTO slots (id, window_id, repo, worktree, branch, base, state, created_at_ms,
            updated_at_ms) VALUES ('never', NULL, ?1, ?2, 'reconcile/slot-never', ?3, 'free', 1, 1)",
        [
            s.env.repo().display().to_string(),
            never.display().to_string(),
            head.trim().to_owned(),
        ],
    )
    .unwrap();
    drop(conn);

    s.env.takeover();
    let report = report_json(&s.env);
    assert_eq!(report["pool"]["slots_removed"], 2, "{report}");
    for gone in crashed_slots.iter().chain([&never]) {
        assert!(!gone.exists(), "{} left", gone.display());
    }
    assert!(
        sh(&s.env.repo(), "git branch --list 'reconcile/slot-never'").is_empty(),
        "its unused branch goes too"
    );
    let live = s.env.client().window(&s.live).unwrap();
    for slot in &live_before.slots {
        assert!(
            live.slots.iter().any(|x| x.id == slot.id),
            "the live window's slot {} was kept",
            slot.id
        );
        assert!(PathBuf::from(&slot.worktree).is_dir());
    }
    check_pools(&s.env, "after the crash");
}

/// Everything a pool pass could change, as text.
fn snapshot(env: &Env) -> String {
    let store = Store::open(&env.home.join("reconcile.db")).unwrap();
    let mut worktrees = all_worktrees(env);
    worktrees.sort();
    format!(
        "{:?}\n{:?}\n{:?}\n{worktrees:?}\n{}\n{}",
        store.windows().unwrap(),
        store.slots().unwrap(),
        store.leases().unwrap(),
        sh(&env.repo(), "git worktree list --porcelain"),
        sh(&env.repo(), "git for-each-ref refs/heads"),
    )
}

fn second_run_changes_nothing(story: &mut Option<Story>) {
    let s = self::story(story);
    check_pools(&s.env, "before the second run");
    let before = snapshot(&s.env);
    let out: Value =
        serde_json::from_str(&ok(s.env.cli(&["daemon", "restart", "--json"]))).unwrap();
    assert_eq!(out["action"], "replaced");
    let report = report_json(&s.env);
    assert_eq!(report["kind"], "boot");
    let acted = pool_actions(&report);
    assert_eq!(acted, 0, "{report}");
    assert_eq!(report["warnings"].as_array().unwrap().len(), 0, "{report}");
    check_pools(&s.env, "after the second run");
    assert_eq!(snapshot(&s.env), before, "the second run changed something");
}

fn close_cleans(story: &mut Option<Story>) {
    let s = self::story(story);
    let session = ok(s
        .env
        .cli(&["session", "new", "--window", &s.live, "--", "sleep", "600"]))
    .trim()
    .to_owned();
    let before = s.env.client().window(&s.live).unwrap();
    let session_worktree = s.env.client().session(&session).unwrap().worktree;
    ok(s.env.cli(&["window", "close", &s.live]));
    let client = s.env.client();
    assert_eq!(client.window(&s.live).unwrap().state, WindowState::Closing);
    // A slot the provisioner was making as the close came in is removed by the next sweep.
    wait_for("only the session's slot to stay", DEADLINE, || {
        let w = client.window(&s.live).unwrap();
        w.provisioning == 0
            && w.slots.len() == 1
            && w.slots[0].session.as_deref() == Some(session.as_str())
    });
    for slot in before.slots.iter().filter(|x| x.session.is_none()) {
        assert!(
            !PathBuf::from(&slot.worktree).exists(),
            "{} left",
            slot.worktree
        );
    }
    if let Some(lease) = &s.healthy_lease {
        assert!(client.renew_lease(lease).is_err(), "closing released it");
    }
    ok(s.env.cli(&["session", "stop", &session]));
    wait_for("the window to close", DEADLINE, || {
        client.window(&s.live).unwrap().state == WindowState::Closed
    });
    assert!(
        PathBuf::from(&session_worktree).is_dir(),
        "the session's work stays"
    );
    check_pools(&s.env, "after the close");
}

fn crash_while_provisioning(story: &mut Option<Story>) {
    let s = self::story(story);
    for failpoint in ["pool.after_row", "pool.after_worktree"] {
        s.env
            .stop_recorded_daemon(std::time::Duration::from_secs(5));
        let mut daemon = start_at(&s.env, failpoint);
        wait_ready_or_dead(&s.env, &mut daemon);
        let repo = s.env.repo().display().to_string();
        let window = ok(s
            .env
            .cli(&["window", "open", "--repo", &repo, "--slots", "2"]));
        died_at(daemon, failpoint);
        s.env.takeover();
        let report = report_json(&s.env);
        assert_eq!(
            report["pool"]["slots_half_made_removed"], 1,
            "{failpoint}: {report}"
        );
        check_pools(&s.env, failpoint);
        let window = s.env.client().window(window.trim()).unwrap();
        assert_eq!(window.free(), 2, "{failpoint}: {window:?}");
    }
}
