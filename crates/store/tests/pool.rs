//! Windows, slots and leases against real SQLite files.

use std::path::PathBuf;

use reconcile_core::{
    Lease, LeaseId, Runtime, SessionId, SessionState, Slot, SlotId, SlotState, TmuxHandle, Window,
    WindowId, WindowState,
};
use reconcile_store::{NewSession, Store};

fn window(id: &str) -> Window {
    Window {
        id: WindowId::parse(id).unwrap(),
        name: Some("w".into()),
        repo: "/repo".into(),
        state: WindowState::Open,
        target: 2,
        created_at_ms: 1,
    }
}

fn slot(id: &str, window: Option<&str>, state: SlotState, at: i64) -> Slot {
    let id = SlotId::parse(id).unwrap();
    Slot {
        window: window.map(|w| WindowId::parse(w).unwrap()),
        repo: "/repo".into(),
        worktree: PathBuf::from(format!("/wt/{id}")),
        branch: id.branch(),
        base: "abc".into(),
        state,
        session: None,
        updated_at_ms: at,
        id,
    }
}

fn lease(id: &str, owner: &str) -> Lease {
    Lease {
        id: LeaseId::parse(id).unwrap(),
        slot: SlotId::parse("unset").unwrap(),
        owner: owner.into(),
        session: None,
        heartbeat_ms: 100,
        ttl_ms: 1000,
        acquired_ms: 100,
    }
}

fn session(id: &str) -> NewSession {
    let id = SessionId::parse(id).unwrap();
    NewSession {
        name: None,
        repo: "/ignored".into(),
        branch: "ignored".into(),
        worktree: "/ignored".into(),
        runtime: Runtime::Tmux(TmuxHandle::intent(id.tmux_name())),
        command: vec!["sleep".into(), "1".into()],
        resume_token: None,
        id,
    }
}

#[test]
fn windows_slots_and_leases_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("r.db")).unwrap();
    let w = window("w1");
    store.insert_window(&w).unwrap();
    assert_eq!(store.window(&w.id).unwrap(), Some(w.clone()));
    assert!(
        store
            .set_window_state(&w.id, WindowState::Closing, 5)
            .unwrap()
    );
    assert_eq!(
        store.windows().unwrap()[0].state,
        WindowState::Closing,
        "state written"
    );
    assert!(
        !store
            .set_window_state(&WindowId::parse("nope").unwrap(), WindowState::Closed, 5)
            .unwrap()
    );

    let s = slot("s1", Some("w1"), SlotState::Provisioning, 1);
    store.insert_slot(&s).unwrap();
    assert_eq!(store.slot(&s.id).unwrap(), Some(s.clone()));
    // A conditional move only happens from the states named.
    assert!(
        !store
            .set_slot_state(&s.id, &[SlotState::Free], SlotState::Leased, 2)
            .unwrap()
    );
    assert!(
        store
            .set_slot_state(&s.id, &[SlotState::Provisioning], SlotState::Free, 2)
            .unwrap()
    );
    let orphan = slot("s2", None, SlotState::Free, 2);
    store.insert_slot(&orphan).unwrap();
    assert_eq!(store.slots().unwrap()[1].window, None);

    let mut l = lease("l1", "ci");
    l.slot = s.id.clone();
    store.insert_lease(&l).unwrap();
    assert!(store.renew_lease(&l.id, 500).unwrap());
    assert_eq!(store.lease(&l.id).unwrap().unwrap().heartbeat_ms, 500);
    assert!(store.delete_lease(&l.id).unwrap());
    assert!(!store.renew_lease(&l.id, 600).unwrap(), "a reaped lease");
    store.delete_slot(&orphan.id).unwrap();
    assert_eq!(store.slots().unwrap().len(), 1);
}

#[test]
fn taking_a_slot_writes_slot_lease_and_session_together() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("r.db")).unwrap();
    store.insert_window(&window("w1")).unwrap();
    store
        .insert_slot(&slot("s1", Some("w1"), SlotState::Free, 1))
        .unwrap();
    store
        .insert_slot(&slot("s2", Some("w1"), SlotState::Free, 2))
        .unwrap();
    let w = WindowId::parse("w1").unwrap();

    let taken = store
        .take_slot(&w, lease("l1", "session:a1"), Some(&session("a1")), 10)
        .unwrap()
        .unwrap();
    assert_eq!(taken.slot.id.as_str(), "s1", "the oldest free slot");
    assert_eq!(taken.lease.slot.as_str(), "s1");
    let row = store
        .get(&SessionId::parse("a1").unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(row.state, SessionState::Spawning);
    assert_eq!(
        row.worktree,
        PathBuf::from("/wt/s1"),
        "on the slot's worktree"
    );
    assert_eq!(row.branch, "reconcile/slot-s1");
    let s1 = store.slot(&taken.slot.id).unwrap().unwrap();
    assert_eq!((s1.state, s1.session), (SlotState::Used, Some(row.id)));

    // Without a session the slot is leased to an outside owner.
    let taken = store
        .take_slot(&w, lease("l2", "ci"), None, 11)
        .unwrap()
        .unwrap();
    assert_eq!(taken.slot.state, SlotState::Leased);
    assert!(
        store
            .take_slot(&w, lease("l3", "ci"), None, 12)
            .unwrap()
            .is_none(),
        "no free slot left"
    );
    assert!(
        store
            .lease(&LeaseId::parse("l3").unwrap())
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_failed_take_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("r.db")).unwrap();
    store.insert_window(&window("w1")).unwrap();
    store
        .insert_slot(&slot("s1", Some("w1"), SlotState::Free, 1))
        .unwrap();
    let w = WindowId::parse("w1").unwrap();
    // The session id is taken already: the session insert fails inside the transaction.
    store.insert_spawning(&session("a1"), 1).unwrap();
    assert!(
        store
            .take_slot(&w, lease("l1", "session:a1"), Some(&session("a1")), 10)
            .is_err()
    );
    assert_eq!(store.slots().unwrap()[0].state, SlotState::Free);
    assert!(store.leases().unwrap().is_empty());
}

#[test]
fn two_connections_never_take_the_same_slot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let store = Store::open(&path).unwrap();
    store.insert_window(&window("w1")).unwrap();
    for i in 0..20 {
        store
            .insert_slot(&slot(&format!("s{i}"), Some("w1"), SlotState::Free, i))
            .unwrap();
    }
    let takers: Vec<_> = (0..2)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Store::open(&path).unwrap();
                let w = WindowId::parse("w1").unwrap();
                let mut got = Vec::new();
                for i in 0.. {
                    match store
                        .take_slot(&w, lease(&format!("l{t}-{i}"), "ci"), None, i)
                        .unwrap()
                    {
                        Some(taken) => got.push(taken.slot.id),
                        None => break,
                    }
                }
                got
            })
        })
        .collect();
    let mut all: Vec<SlotId> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(
        (before, all.len()),
        (20, 20),
        "each slot taken exactly once"
    );
    assert_eq!(store.leases().unwrap().len(), 20);
}

#[test]
fn a_database_of_the_first_schema_is_migrated_with_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(include_str!("../src/migrations/001_sessions.sql"))
            .unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute(
            "INSERT INTO sessions (id, repo, branch, worktree, runtime_kind, command, state,
                created_at_ms, updated_at_ms)
             VALUES ('old1', '/r', 'b', '/w', 'tmux', '[]', 'terminated', 1, 1)",
            [],
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.list().unwrap()[0].id.as_str(), "old1");
    assert!(store.windows().unwrap().is_empty());
}
