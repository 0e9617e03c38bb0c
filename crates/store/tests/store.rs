//! The session store against real SQLite files: rows, transitions, migrations, bad files.

use std::fs;
use std::path::PathBuf;

use reconcile_core::{ProcessIdentity, Runtime, Secret, SessionId, SessionState, TmuxHandle};
use reconcile_store::{Error, NewSession, Store};

fn new_session(id: &str) -> NewSession {
    let id = SessionId::parse(id).unwrap();
    NewSession {
        name: Some("agent".into()),
        repo: PathBuf::from("/repo"),
        branch: id.branch(),
        worktree: PathBuf::from(format!("/wt/{id}")),
        runtime: Runtime::Tmux(TmuxHandle::intent(id.tmux_name())),
        command: vec!["sleep".into(), "100".into()],
        resume_token: Some(Secret::new("tok-123".into())),
        id,
    }
}

#[test]
fn rows_round_trip_through_every_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("r.db")).unwrap();
    let new = new_session("s-1");
    store.insert_spawning(&new, 1000).unwrap();

    let s = store.get(&new.id).unwrap().unwrap();
    assert_eq!(s.state, SessionState::Spawning);
    assert_eq!(s.command, ["sleep", "100"]);
    assert_eq!(s.resume_token.as_ref().unwrap().expose(), "tok-123");
    assert_eq!(s.runtime, new.runtime);
    assert_eq!(s.created_at_ms, 1000);

    let handle = Runtime::Tmux(TmuxHandle {
        name: new.id.tmux_name(),
        id: Some("$4".into()),
        server: Some(ProcessIdentity {
            boot_id: "b".into(),
            pid: 10,
            start_ticks: 20,
        }),
        pane: Some(ProcessIdentity {
            boot_id: "b".into(),
            pid: 11,
            start_ticks: 21,
        }),
    });
    store.mark_running(&new.id, &handle, 2000).unwrap();
    let s = store.get(&new.id).unwrap().unwrap();
    assert_eq!(
        (s.state, s.runtime.clone(), s.updated_at_ms),
        (SessionState::Running, handle.clone(), 2000)
    );

    store.mark_saved(&new.id, 3000).unwrap();
    assert_eq!(store.in_states(&[SessionState::Saved]).unwrap().len(), 1);
    store.mark_running(&new.id, &handle, 3500).unwrap();

    store
        .terminate(
            &new.id,
            "stopped",
            Some("refs/reconcile/preserved/s-1"),
            4000,
        )
        .unwrap();
    // A second terminate keeps the first reason and ref.
    store.terminate(&new.id, "again", None, 5000).unwrap();
    let s = store.get(&new.id).unwrap().unwrap();
    assert_eq!(s.state, SessionState::Terminated);
    assert_eq!(s.end_reason.as_deref(), Some("stopped"));
    assert_eq!(
        s.preserved_ref.as_deref(),
        Some("refs/reconcile/preserved/s-1")
    );
    assert_eq!(s.ended_at_ms, Some(4000));

    let err = store.mark_saved(&new.id, 6000).unwrap_err();
    assert!(
        matches!(
            err,
            Error::WrongState {
                actual: SessionState::Terminated,
                ..
            }
        ),
        "{err}"
    );
    let missing = SessionId::parse("nope").unwrap();
    assert!(matches!(
        store.terminate(&missing, "x", None, 1).unwrap_err(),
        Error::NotFound { .. }
    ));
}

#[test]
fn instance_id_is_created_once_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let first = Store::open(&path).unwrap().instance_id().unwrap();
    let again = Store::open(&path).unwrap().instance_id().unwrap();
    assert_eq!(first, again);
    assert_eq!(first.len(), 16);
    let other = Store::open(&dir.path().join("other.db"))
        .unwrap()
        .instance_id()
        .unwrap();
    assert_ne!(first, other);
}

#[test]
fn uses_wal_and_foreign_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    drop(Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 2, "every migration ran");
}

#[test]
fn a_file_that_is_not_a_database_is_named_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let garbage = b"this is not a database, but someone's data".repeat(200);
    fs::write(&path, &garbage).unwrap();
    let err = Store::open(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert_eq!(
        fs::read(&path).unwrap(),
        garbage,
        "the file must not change"
    );
}

#[test]
fn a_database_from_a_newer_build_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    drop(Store::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let before = fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, Error::Migrate { .. }), "{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn an_unreadable_handle_is_kept_and_proves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    let store = Store::open(&path).unwrap();
    let new = new_session("s-2");
    store.insert_spawning(&new, 1).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE sessions SET runtime_handle = '{not json' WHERE id = 's-2'",
            [],
        )
        .unwrap();
    }
    let s = store.get(&new.id).unwrap().unwrap();
    assert_eq!(
        s.runtime,
        Runtime::Unreadable(reconcile_core::RuntimeKind::Tmux)
    );
}

#[test]
fn a_failed_transaction_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("r.db")).unwrap();
    let a = new_session("s-a");
    let result = store.transaction(|tx| {
        tx.insert_spawning(&a, 1)?;
        tx.insert_spawning(&a, 1) // duplicate id: fails
    });
    assert!(result.is_err());
    assert!(store.get(&a.id).unwrap().is_none());
}
