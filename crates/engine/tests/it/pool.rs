//! Windows, warm slots and leases (LEAK-003) against real git worktrees, tmux and SQLite: the pool
//! pass reaps what a dead owner left, removes what a gone window left, and touches nothing live.

use std::fs;
use std::path::Path;

use reconcile_core::{
    Lease, LeaseId, PoolCounts, SessionState, Slot, SlotId, SlotState, Window, WindowId,
    WindowState,
};
use reconcile_engine::{
    Error, NewSessionRequest, acquire_lease, close_window, create_session, open_window,
    provision_slot, provisioning_plan, release_lease, renew_lease, stop_session,
};

use crate::fixture::{Fixture, assert_settled};

/// git's output, trimmed.
fn git(dir: &Path, args: &str) -> String {
    crate::fixture::git(dir, args).trim().to_owned()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Open a window and provision it fully, as the daemon's provisioner would.
fn open(f: &Fixture, slots: u32) -> Window {
    let w = open_window(&f.store, &f.host, &f.repo, None, slots, now()).unwrap();
    while let Some((window, _)) = provisioning_plan(&f.store).unwrap().into_iter().next() {
        provision_slot(&f.store, &f.host, &window, now()).unwrap();
    }
    w
}

fn slots_of(f: &Fixture, w: &WindowId) -> Vec<Slot> {
    f.store
        .slots()
        .unwrap()
        .into_iter()
        .filter(|s| s.window.as_ref() == Some(w))
        .collect()
}

fn pool(f: &Fixture) -> PoolCounts {
    let report = f.reconcile();
    assert_eq!(report.warning_count(), 0, "{report}");
    report.pool.unwrap()
}

fn branch_exists(repo: &Path, branch: &str) -> bool {
    !git(repo, &format!("branch --list {branch}")).is_empty()
}

/// Plant a lease on a free slot of `w` through the store, as a crashed owner would leave it.
fn plant_lease(f: &Fixture, w: &WindowId, id: &str, owner: &str, heartbeat_ms: i64) -> SlotId {
    let lease = Lease {
        id: LeaseId::parse(id).unwrap(),
        slot: SlotId::parse("pending").unwrap(),
        owner: owner.into(),
        session: None,
        heartbeat_ms,
        ttl_ms: 60_000,
        acquired_ms: heartbeat_ms,
    };
    f.store
        .take_slot(w, lease, None, now())
        .unwrap()
        .unwrap()
        .slot
        .id
}

#[test]
fn a_window_provisions_clean_worktrees_on_fresh_branches_at_head() {
    let f = Fixture::new("pool-provision");
    let w = open(&f, 3);
    let slots = slots_of(&f, &w.id);
    assert_eq!(slots.len(), 3);
    let head = git(&f.repo, "rev-parse HEAD");
    for s in &slots {
        assert_eq!(s.state, SlotState::Free);
        assert_eq!(git(&s.worktree, "rev-parse HEAD"), head);
        assert_eq!(git(&s.worktree, "status --porcelain"), "");
        assert_eq!(git(&s.worktree, "branch --show-current"), s.branch);
    }
    assert!(provisioning_plan(&f.store).unwrap().is_empty());
    assert_settled(&f);
}

#[test]
fn unowned_and_stale_leases_are_reaped_and_a_healthy_one_kept() {
    let f = Fixture::new("pool-leases");
    let w = open(&f, 4);
    let unowned = plant_lease(&f, &w.id, "unowned", "", now());
    let stale = plant_lease(&f, &w.id, "stale", "crashed-ci", now() - 61_000);
    let (healthy, healthy_slot) = acquire_lease(&f.store, &w.id, "ci", None, now()).unwrap();
    // Work left in the stale lease's slot is preserved, never deleted.
    let stale_slot = f.store.slot(&stale).unwrap().unwrap();
    fs::write(stale_slot.worktree.join("half-done.txt"), "work\n").unwrap();

    let counts = pool(&f);
    assert_eq!(
        (counts.leases_reaped_unowned, counts.leases_reaped_stale),
        (1, 1),
        "{counts:?}"
    );
    assert_eq!(counts.leases_kept, 1);
    assert_eq!(
        f.store.slot(&unowned).unwrap().unwrap().state,
        SlotState::Free,
        "a clean slot returns to the pool"
    );
    assert_eq!(
        f.store.slot(&stale).unwrap().unwrap().state,
        SlotState::Retired
    );
    assert_eq!(
        fs::read_to_string(stale_slot.worktree.join("half-done.txt")).unwrap(),
        "work\n"
    );
    assert_eq!(
        git(
            &f.repo,
            &format!("show {}:half-done.txt", stale.preserved_ref())
        ),
        "work"
    );
    assert!(f.store.lease(&healthy.id).unwrap().is_some());
    assert_eq!(
        f.store.slot(&healthy_slot.id).unwrap().unwrap().state,
        SlotState::Leased
    );
    assert_settled(&f);

    // The healthy owner renews and releases; its clean slot is free again.
    renew_lease(&f.store, &healthy.id, now()).unwrap();
    release_lease(&f.store, &f.host, &healthy.id, now()).unwrap();
    assert_eq!(
        f.store.slot(&healthy_slot.id).unwrap().unwrap().state,
        SlotState::Free
    );
    // A reaped lease is gone for its owner.
    assert!(matches!(
        renew_lease(&f.store, &LeaseId::parse("stale").unwrap(), now()),
        Err(Error::NoSuchLease { .. })
    ));
}

#[test]
fn slots_of_a_gone_or_never_recorded_window_are_removed_and_live_ones_kept() {
    let f = Fixture::new("pool-gone");
    let live = open(&f, 1);
    let base = git(&f.repo, "rev-parse HEAD");
    let leftover = |id: &str, window: Option<&str>| {
        let id = SlotId::parse(id).unwrap();
        let slot = Slot {
            window: window.map(|w| WindowId::parse(w).unwrap()),
            repo: f.repo.clone(),
            worktree: f.home.slot_worktree(id.as_str()),
            branch: id.branch(),
            base: base.clone(),
            state: SlotState::Free,
            session: None,
            updated_at_ms: now(),
            id,
        };
        f.host
            .git
            .add_worktree_at(&slot.repo, &slot.branch, &slot.worktree, &base)
            .unwrap();
        f.store.insert_slot(&slot).unwrap();
        slot
    };
    let crashed = leftover("crashed", Some("w-crashed"));
    let never = leftover("never", None);
    let dirty = leftover("dirty", Some("w-crashed"));
    fs::write(dirty.worktree.join("notes.txt"), "keep me\n").unwrap();

    let counts = pool(&f);
    assert_eq!(counts.slots_removed, 2, "{counts:?}");
    assert_eq!(counts.slots_retired, 1, "{counts:?}");
    for gone in [&crashed, &never] {
        assert!(!gone.worktree.exists(), "{}", gone.worktree.display());
        assert!(f.store.slot(&gone.id).unwrap().is_none());
        assert!(!branch_exists(&f.repo, &gone.branch));
    }
    assert!(dirty.worktree.join("notes.txt").exists(), "dirty: kept");
    let kept = slots_of(&f, &live.id);
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].state, SlotState::Free);
    assert!(kept[0].worktree.exists());
    assert_settled(&f);
}

#[test]
fn half_made_slots_are_removed_at_boot_and_left_to_the_provisioner_while_running() {
    let f = Fixture::new("pool-half");
    let w = open_window(&f.store, &f.host, &f.repo, None, 4, now()).unwrap();
    let base = git(&f.repo, "rev-parse HEAD");
    let half = |id: &str| {
        let id = SlotId::parse(id).unwrap();
        let slot = Slot {
            window: Some(w.id.clone()),
            repo: f.repo.clone(),
            worktree: f.home.slot_worktree(id.as_str()),
            branch: id.branch(),
            base: base.clone(),
            state: SlotState::Provisioning,
            session: None,
            updated_at_ms: now(),
            id,
        };
        f.store.insert_slot(&slot).unwrap();
        slot
    };
    let _row_only = half("row-only");
    let made = half("made");
    f.host
        .git
        .add_worktree_at(&f.repo, &made.branch, &made.worktree, &base)
        .unwrap();
    let partial = half("partial");
    f.host
        .git
        .add_worktree_at(&f.repo, &partial.branch, &partial.worktree, &base)
        .unwrap();
    fs::remove_dir_all(partial.worktree.join("src")).unwrap();
    let foreign = half("foreign");
    fs::create_dir_all(&foreign.worktree).unwrap();
    fs::write(foreign.worktree.join("theirs.txt"), "not ours\n").unwrap();

    // While the daemon runs, a provisioning slot may be in the provisioner's hands.
    let swept = reconcile_engine::sweep(&f.store, &f.host, false);
    assert_eq!(swept.pool.unwrap().slots_half_made_removed, 0);

    let report = f.reconcile();
    let counts = report.pool.clone().unwrap();
    assert_eq!(counts.slots_half_made_removed, 3, "{report}");
    assert_eq!(report.warning_count(), 1, "the unproven one: {report}");
    for s in [&made, &partial] {
        assert!(!s.worktree.exists());
        assert!(!branch_exists(&f.repo, &s.branch));
    }
    assert!(foreign.worktree.join("theirs.txt").exists());
    assert_eq!(
        git(&f.repo, "worktree list --porcelain")
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "only the repository itself is left"
    );
}

#[test]
fn a_window_session_starts_in_a_slot_and_its_end_retires_the_slot_with_its_work() {
    let f = Fixture::new("pool-session");
    let w = open(&f, 2);
    let request = |window: Option<WindowId>| NewSessionRequest {
        repo: Default::default(),
        name: None,
        command: vec!["sh".into(), "-c".into(), "sleep 1000".into()],
        resume_token: None,
        window,
    };
    let session = create_session(&f.store, &f.host, request(Some(w.id.clone()))).unwrap();
    let slot = slots_of(&f, &w.id)
        .into_iter()
        .find(|s| s.session.as_ref() == Some(&session.id))
        .unwrap();
    assert_eq!(slot.state, SlotState::Used);
    assert_eq!(session.worktree, slot.worktree);
    assert_eq!(session.state, SessionState::Running);
    let lease = f.store.leases().unwrap().pop().unwrap();
    assert_eq!(lease.session.as_ref(), Some(&session.id));
    // Outsiders cannot release the daemon's lease.
    assert!(matches!(
        release_lease(&f.store, &f.host, &lease.id, now()),
        Err(Error::SessionLease { .. })
    ));
    // The session's lease goes stale while the daemon is down: the next boot renews it.
    let mut old = lease.clone();
    old.heartbeat_ms -= 3_600_000;
    f.store.delete_lease(&lease.id).unwrap();
    f.store.insert_lease(&old).unwrap();
    let counts = pool(&f);
    assert_eq!(counts.leases_renewed, 1, "{counts:?}");
    assert!(f.store.lease(&lease.id).unwrap().unwrap().heartbeat_ms > old.heartbeat_ms);

    fs::write(slot.worktree.join("agent.txt"), "result\n").unwrap();
    f.kill_tmux(&session);
    let counts = pool(&f);
    assert_eq!(counts.leases_released_session_ended, 1, "{counts:?}");
    assert_eq!(counts.slots_retired, 1, "{counts:?}");
    let ended = f.session(&session.id);
    assert_eq!(ended.state, SessionState::Terminated);
    assert!(ended.preserved_ref.is_some(), "its work was preserved");
    assert!(slot.worktree.join("agent.txt").exists(), "never deleted");
    assert_settled(&f);

    // A second session takes the other slot; a third finds none free until one is provisioned.
    create_session(&f.store, &f.host, request(Some(w.id.clone()))).unwrap();
    assert!(matches!(
        create_session(&f.store, &f.host, request(Some(w.id.clone()))),
        Err(Error::NoFreeSlot { .. })
    ));
    assert_eq!(provisioning_plan(&f.store).unwrap()[0].1, 2, "refill to 2");
}

#[test]
fn closing_removes_free_slots_and_keeps_a_running_session_until_it_ends() {
    let f = Fixture::new("pool-close");
    let w = open(&f, 3);
    let session = create_session(
        &f.store,
        &f.host,
        NewSessionRequest {
            repo: f.repo.clone(),
            name: None,
            command: vec!["sleep".into(), "1000".into()],
            resume_token: None,
            window: Some(w.id.clone()),
        },
    )
    .unwrap();
    let (_lease, leased) = acquire_lease(&f.store, &w.id, "ci", None, now()).unwrap();
    let free: Vec<Slot> = slots_of(&f, &w.id)
        .into_iter()
        .filter(|s| s.state == SlotState::Free)
        .collect();
    assert_eq!(free.len(), 1);

    let (closing, warnings) = close_window(&f.store, &f.host, &w.id, now()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(closing.state, WindowState::Closing);
    for s in free.iter().chain([&leased]) {
        assert!(!s.worktree.exists(), "{}", s.worktree.display());
        assert!(f.store.slot(&s.id).unwrap().is_none());
    }
    assert!(
        f.store
            .leases()
            .unwrap()
            .iter()
            .all(|l| l.session.is_some())
    );
    assert!(session.worktree.exists(), "a running session's slot stays");
    assert!(matches!(
        acquire_lease(&f.store, &w.id, "ci", None, now()),
        Err(Error::WindowNotOpen { .. })
    ));

    stop_session(&f.store, &f.host, &session.id).unwrap();
    let counts = pool(&f);
    assert_eq!(counts.windows_closed, 1, "{counts:?}");
    assert_eq!(
        f.store.window(&w.id).unwrap().unwrap().state,
        WindowState::Closed
    );
    assert!(
        session.worktree.exists(),
        "a session's worktree is never deleted"
    );
    assert!(f.store.leases().unwrap().is_empty());
    assert_settled(&f);
    // Closing again changes nothing.
    let (again, _) = close_window(&f.store, &f.host, &w.id, now()).unwrap();
    assert_eq!(again.state, WindowState::Closed);
}

#[test]
fn bad_window_requests_are_refused_before_anything_is_made() {
    let f = Fixture::new("pool-bad");
    assert!(matches!(
        open_window(&f.store, &f.host, &f.repo, None, 0, now()),
        Err(Error::InvalidSlots { .. })
    ));
    assert!(matches!(
        open_window(&f.store, &f.host, &f.path("nope"), None, 1, now()),
        Err(Error::NoSuchRepository { .. })
    ));
    let w = open(&f, 1);
    assert!(matches!(
        acquire_lease(&f.store, &w.id, " ", None, now()),
        Err(Error::InvalidOwner)
    ));
    assert!(matches!(
        acquire_lease(&f.store, &w.id, "ci", Some(5), now()),
        Err(Error::InvalidTtl { .. })
    ));
    let other = f.path("other");
    fs::create_dir(&other).unwrap();
    git(&other, "init -q");
    let wrong = create_session(
        &f.store,
        &f.host,
        NewSessionRequest {
            repo: other,
            name: None,
            command: vec!["sleep".into(), "1".into()],
            resume_token: None,
            window: Some(w.id.clone()),
        },
    );
    assert!(
        matches!(wrong, Err(Error::WrongRepository { .. })),
        "{wrong:?}"
    );
    assert!(f.store.list().unwrap().is_empty());
    assert_eq!(slots_of(&f, &w.id)[0].state, SlotState::Free);
}
