//! Windows, slots and leases in the store. Rows that cannot be decoded are skipped with a log
//! line and never rewritten: the pool pass only acts on what it can read.

use std::path::PathBuf;

use reconcile_core::{
    Lease, LeaseId, SessionId, Slot, SlotId, SlotState, Window, WindowId, WindowState,
};
use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};

use crate::rows::path_text;
use crate::{Error, NewSession, Store};

const WINDOW_COLUMNS: &str = "id, name, repo, state, target, created_at_ms";
const SLOT_COLUMNS: &str =
    "id, window_id, repo, worktree, branch, base, state, session_id, updated_at_ms";
const LEASE_COLUMNS: &str = "id, slot_id, owner, session_id, heartbeat_ms, ttl_ms, acquired_ms";

/// A free slot taken for a session: the slot (now `used`), the session row (`spawning`) and the
/// lease, written in one transaction.
#[derive(Debug)]
pub struct Taken {
    pub slot: Slot,
    pub lease: Lease,
}

impl Store {
    pub fn insert_window(&self, window: &Window) -> Result<(), Error> {
        self.conn
            .execute(
                "INSERT INTO windows (id, name, repo, state, target, created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![
                    window.id.as_str(),
                    window.name,
                    path_text(&window.repo),
                    window.state.as_str(),
                    window.target,
                    window.created_at_ms
                ],
            )
            .map_err(self.query_error())?;
        Ok(())
    }

    pub fn window(&self, id: &WindowId) -> Result<Option<Window>, Error> {
        let sql = format!("SELECT {WINDOW_COLUMNS} FROM windows WHERE id = ?1");
        let row = self
            .conn
            .query_row(&sql, params![id.as_str()], read_window)
            .optional()
            .map_err(self.query_error())?;
        Ok(row.flatten())
    }

    /// Every window, oldest first.
    pub fn windows(&self) -> Result<Vec<Window>, Error> {
        let sql = format!("SELECT {WINDOW_COLUMNS} FROM windows ORDER BY created_at_ms, id");
        self.collect(&sql, [], read_window)
    }

    /// Set a window's state; `false` when it has no row.
    pub fn set_window_state(
        &self,
        id: &WindowId,
        state: WindowState,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let changed = self
            .conn
            .execute(
                "UPDATE windows SET state = ?2, updated_at_ms = ?3 WHERE id = ?1",
                params![id.as_str(), state.as_str(), now_ms],
            )
            .map_err(self.query_error())?;
        Ok(changed == 1)
    }

    /// Write a slot row; `provisioning` before its worktree exists.
    pub fn insert_slot(&self, slot: &Slot) -> Result<(), Error> {
        self.conn
            .execute(
                "INSERT INTO slots (id, window_id, repo, worktree, branch, base, state, session_id,
                    created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
                params![
                    slot.id.as_str(),
                    slot.window.as_ref().map(WindowId::as_str),
                    path_text(&slot.repo),
                    path_text(&slot.worktree),
                    slot.branch,
                    slot.base,
                    slot.state.as_str(),
                    slot.session.as_ref().map(SessionId::as_str),
                    slot.updated_at_ms
                ],
            )
            .map_err(self.query_error())?;
        Ok(())
    }

    /// Every slot, oldest first.
    pub fn slots(&self) -> Result<Vec<Slot>, Error> {
        let sql = format!("SELECT {SLOT_COLUMNS} FROM slots ORDER BY created_at_ms, id");
        self.collect(&sql, [], read_slot)
    }

    pub fn slot(&self, id: &SlotId) -> Result<Option<Slot>, Error> {
        let sql = format!("SELECT {SLOT_COLUMNS} FROM slots WHERE id = ?1");
        let row = self
            .conn
            .query_row(&sql, params![id.as_str()], read_slot)
            .optional()
            .map_err(self.query_error())?;
        Ok(row.flatten())
    }

    /// Move a slot from one of `from` to `to`; `false` when it was in no state of `from` (or has
    /// no row), so two writers never both take one slot.
    pub fn set_slot_state(
        &self,
        id: &SlotId,
        from: &[SlotState],
        to: SlotState,
        now_ms: i64,
    ) -> Result<bool, Error> {
        let marks: Vec<String> = (0..from.len()).map(|i| format!("?{}", i + 4)).collect();
        let sql = format!(
            "UPDATE slots SET state = ?2, updated_at_ms = ?3 WHERE id = ?1 AND state IN ({})",
            marks.join(", ")
        );
        let mut args: Vec<Box<dyn rusqlite::ToSql>> = vec![
            Box::new(id.as_str().to_owned()),
            Box::new(to.as_str()),
            Box::new(now_ms),
        ];
        args.extend(
            from.iter()
                .map(|s| Box::new(s.as_str()) as Box<dyn rusqlite::ToSql>),
        );
        let changed = self
            .conn
            .execute(&sql, rusqlite::params_from_iter(args))
            .map_err(self.query_error())?;
        Ok(changed == 1)
    }

    pub fn delete_slot(&self, id: &SlotId) -> Result<(), Error> {
        self.conn
            .execute("DELETE FROM slots WHERE id = ?1", params![id.as_str()])
            .map_err(self.query_error())?;
        Ok(())
    }

    /// Every lease, oldest first.
    pub fn leases(&self) -> Result<Vec<Lease>, Error> {
        let sql = format!("SELECT {LEASE_COLUMNS} FROM leases ORDER BY acquired_ms, id");
        self.collect(&sql, [], read_lease)
    }

    pub fn lease(&self, id: &LeaseId) -> Result<Option<Lease>, Error> {
        let sql = format!("SELECT {LEASE_COLUMNS} FROM leases WHERE id = ?1");
        let row = self
            .conn
            .query_row(&sql, params![id.as_str()], read_lease)
            .optional()
            .map_err(self.query_error())?;
        Ok(row.flatten())
    }

    pub fn insert_lease(&self, lease: &Lease) -> Result<(), Error> {
        self.conn
            .execute(
                &format!(
                    "INSERT INTO leases ({LEASE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
                ),
                params![
                    lease.id.as_str(),
                    lease.slot.as_str(),
                    lease.owner,
                    lease.session.as_ref().map(SessionId::as_str),
                    lease.heartbeat_ms,
                    lease.ttl_ms,
                    lease.acquired_ms
                ],
            )
            .map_err(self.query_error())?;
        Ok(())
    }

    /// Set a lease's heartbeat to `now_ms`; `false` when it has no row (it was reaped).
    pub fn renew_lease(&self, id: &LeaseId, now_ms: i64) -> Result<bool, Error> {
        let changed = self
            .conn
            .execute(
                "UPDATE leases SET heartbeat_ms = ?2 WHERE id = ?1",
                params![id.as_str(), now_ms],
            )
            .map_err(self.query_error())?;
        Ok(changed == 1)
    }

    /// Delete a lease; `false` when it had no row.
    pub fn delete_lease(&self, id: &LeaseId) -> Result<bool, Error> {
        let changed = self
            .conn
            .execute("DELETE FROM leases WHERE id = ?1", params![id.as_str()])
            .map_err(self.query_error())?;
        Ok(changed == 1)
    }

    /// Take the oldest free slot of `window` under `lease` (its `slot` is filled in here). With
    /// `session`, the slot becomes `used` and the session's `spawning` row is written (on the
    /// slot's worktree and branch) in the same transaction; without, it becomes `leased`.
    /// `None` when the window has no free slot.
    pub fn take_slot(
        &self,
        window: &WindowId,
        mut lease: Lease,
        session: Option<&NewSession>,
        now_ms: i64,
    ) -> Result<Option<Taken>, Error> {
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
            .map_err(self.query_error())?;
        let sql = format!(
            "SELECT {SLOT_COLUMNS} FROM slots WHERE window_id = ?1 AND state = 'free'
             ORDER BY created_at_ms, id LIMIT 1"
        );
        let Some(mut slot) = tx
            .query_row(&sql, params![window.as_str()], read_slot)
            .optional()
            .map_err(self.query_error())?
            .flatten()
        else {
            return Ok(None);
        };
        slot.state = if session.is_some() {
            SlotState::Used
        } else {
            SlotState::Leased
        };
        slot.session = session.map(|s| s.id.clone());
        slot.updated_at_ms = now_ms;
        tx.execute(
            "UPDATE slots SET state = ?2, session_id = ?3, updated_at_ms = ?4 WHERE id = ?1",
            params![
                slot.id.as_str(),
                slot.state.as_str(),
                slot.session.as_ref().map(SessionId::as_str),
                now_ms
            ],
        )
        .map_err(self.query_error())?;
        lease.slot = slot.id.clone();
        self.insert_lease(&lease)?;
        if let Some(new) = session {
            let mut new = new.clone();
            new.worktree = slot.worktree.clone();
            new.branch = slot.branch.clone();
            new.repo = slot.repo.clone();
            self.insert_spawning(&new, now_ms)?;
        }
        tx.commit().map_err(self.query_error())?;
        Ok(Some(Taken { slot, lease }))
    }

    /// The states of the sessions that leases or slots name (one query, however many sessions
    /// the store holds).
    pub fn pool_session_states(
        &self,
    ) -> Result<std::collections::HashMap<SessionId, reconcile_core::SessionState>, Error> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, state FROM sessions WHERE id IN
                    (SELECT session_id FROM leases WHERE session_id IS NOT NULL
                     UNION SELECT session_id FROM slots WHERE session_id IS NOT NULL)",
            )
            .map_err(self.query_error())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(self.query_error())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_error())?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, state)| Some((SessionId::parse(&id).ok()?, state.parse().ok()?)))
            .collect())
    }

    fn collect<T, P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        read: fn(&Row<'_>) -> rusqlite::Result<Option<T>>,
    ) -> Result<Vec<T>, Error> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(self.query_error())?;
        let rows = stmt
            .query_map(params, read)
            .map_err(self.query_error())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_error())?;
        Ok(rows.into_iter().flatten().collect())
    }
}

/// Log and skip a row whose column does not decode.
fn skip<T, E: std::fmt::Display>(table: &str, id: &str, what: &str, e: E) -> Option<T> {
    tracing::warn!(table, id, error = %e, "skipping a row with an unreadable {what}");
    None
}

fn read_window(row: &Row<'_>) -> rusqlite::Result<Option<Window>> {
    let id: String = row.get(0)?;
    let state: String = row.get(3)?;
    let Ok(parsed) = WindowId::parse(&id) else {
        return Ok(skip("windows", &id, "id", "invalid"));
    };
    let state = match state.parse::<WindowState>() {
        Ok(s) => s,
        Err(e) => return Ok(skip("windows", &id, "state", e)),
    };
    Ok(Some(Window {
        id: parsed,
        name: row.get(1)?,
        repo: PathBuf::from(row.get::<_, String>(2)?),
        state,
        target: row.get(4)?,
        created_at_ms: row.get(5)?,
    }))
}

fn read_slot(row: &Row<'_>) -> rusqlite::Result<Option<Slot>> {
    let id: String = row.get(0)?;
    let Ok(parsed) = SlotId::parse(&id) else {
        return Ok(skip("slots", &id, "id", "invalid"));
    };
    let state = match row.get::<_, String>(6)?.parse::<SlotState>() {
        Ok(s) => s,
        Err(e) => return Ok(skip("slots", &id, "state", e)),
    };
    // A window id that does not parse names no window we could have recorded.
    let window = row
        .get::<_, Option<String>>(1)?
        .and_then(|w| WindowId::parse(&w).ok());
    let session = match row.get::<_, Option<String>>(7)? {
        None => None,
        Some(s) => match SessionId::parse(&s) {
            Ok(s) => Some(s),
            Err(e) => return Ok(skip("slots", &id, "session id", e)),
        },
    };
    Ok(Some(Slot {
        id: parsed,
        window,
        repo: PathBuf::from(row.get::<_, String>(2)?),
        worktree: PathBuf::from(row.get::<_, String>(3)?),
        branch: row.get(4)?,
        base: row.get(5)?,
        state,
        session,
        updated_at_ms: row.get(8)?,
    }))
}

fn read_lease(row: &Row<'_>) -> rusqlite::Result<Option<Lease>> {
    let id: String = row.get(0)?;
    let Ok(parsed) = LeaseId::parse(&id) else {
        return Ok(skip("leases", &id, "id", "invalid"));
    };
    let slot = match SlotId::parse(&row.get::<_, String>(1)?) {
        Ok(s) => s,
        Err(e) => return Ok(skip("leases", &id, "slot id", e)),
    };
    let session = match row.get::<_, Option<String>>(3)? {
        None => None,
        Some(s) => match SessionId::parse(&s) {
            Ok(s) => Some(s),
            Err(e) => return Ok(skip("leases", &id, "session id", e)),
        },
    };
    Ok(Some(Lease {
        id: parsed,
        slot,
        owner: row.get(2)?,
        session,
        heartbeat_ms: row.get(4)?,
        ttl_ms: row.get(5)?,
        acquired_ms: row.get(6)?,
    }))
}
