//! The session store: one SQLite file with versioned migrations, WAL and foreign keys.
//!
//! A database that cannot be opened or migrated is reported with its path and left exactly as it
//! was: this crate never deletes, truncates or recreates a database file.

mod pool;
mod rows;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reconcile_core::{Runtime, Session, SessionId, SessionState};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use rusqlite_migration::{M, Migrations};

pub use pool::Taken;
pub use rows::NewSession;

const MIGRATIONS: &[M<'static>] = &[
    M::up(include_str!("migrations/001_sessions.sql")),
    M::up(include_str!("migrations/002_pools.sql")),
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open the database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "cannot migrate the database {path}: {source}. The file was left untouched; move it aside \
         to start afresh, or run a newer build if it was written by one"
    )]
    Migrate {
        path: PathBuf,
        source: rusqlite_migration::Error,
    },
    #[error("database {path}: {source}")]
    Query {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("no session {id}")]
    NotFound { id: SessionId },
    #[error("session {id} is {actual}, not {expected}")]
    WrongState {
        id: SessionId,
        expected: &'static str,
        actual: SessionState,
    },
    #[error("cannot create an instance id: {source}")]
    Random { source: getrandom::Error },
}

/// An open session store.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Open (creating if absent) and migrate the database at `path`.
    pub fn open(path: &Path) -> Result<Store, Error> {
        let open_error = |source| Error::Open {
            path: path.to_owned(),
            source,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let mut conn = Connection::open_with_flags(path, flags).map_err(open_error)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(open_error)?;
        // The first statements that read the file: a file that is not a database fails here.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(open_error)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_error)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_error)?;
        Migrations::from_slice(MIGRATIONS)
            .to_latest(&mut conn)
            .map_err(|source| Error::Migrate {
                path: path.to_owned(),
                source,
            })?;
        let store = Store {
            conn,
            path: path.to_owned(),
        };
        store.ensure_instance_id()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn query_error(&self) -> impl Fn(rusqlite::Error) -> Error + '_ {
        move |source| Error::Query {
            path: self.path.clone(),
            source,
        }
    }

    fn ensure_instance_id(&self) -> Result<(), Error> {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|source| Error::Random { source })?;
        let fresh: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        self.conn
            .execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('instance_id', ?1)",
                params![fresh],
            )
            .map_err(self.query_error())?;
        Ok(())
    }

    /// The id of this state directory: created once with the database, stable across restarts.
    pub fn instance_id(&self) -> Result<String, Error> {
        self.conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'instance_id'",
                [],
                |r| r.get(0),
            )
            .map_err(self.query_error())
    }

    /// Write the `spawning` row that must exist before any side effect of a create.
    pub fn insert_spawning(&self, new: &NewSession, now_ms: i64) -> Result<(), Error> {
        let (kind, handle) = rows::encode_runtime(&new.runtime);
        self.conn
            .execute(
                "INSERT INTO sessions (id, name, repo, branch, worktree, runtime_kind, runtime_handle,
                    command, resume_token, state, created_at_ms, updated_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'spawning', ?10, ?10)",
                params![
                    new.id.as_str(),
                    new.name,
                    rows::path_text(&new.repo),
                    new.branch,
                    rows::path_text(&new.worktree),
                    kind,
                    handle,
                    rows::encode_command(&new.command),
                    new.resume_token.as_ref().map(|t| t.expose()),
                    now_ms
                ],
            )
            .map_err(self.query_error())?;
        Ok(())
    }

    pub fn get(&self, id: &SessionId) -> Result<Option<Session>, Error> {
        let sql = format!("SELECT {} FROM sessions WHERE id = ?1", rows::COLUMNS);
        let row = self
            .conn
            .query_row(&sql, params![id.as_str()], rows::read)
            .optional()
            .map_err(self.query_error())?;
        Ok(row.and_then(rows::decode))
    }

    /// Every session, oldest first.
    pub fn list(&self) -> Result<Vec<Session>, Error> {
        self.select("1 = 1", &[])
    }

    /// Sessions in any of `states`, oldest first.
    pub fn in_states(&self, states: &[SessionState]) -> Result<Vec<Session>, Error> {
        let marks = vec!["?"; states.len()].join(", ");
        let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        self.select(&format!("state IN ({marks})"), &names)
    }

    fn select(&self, filter: &str, args: &[&str]) -> Result<Vec<Session>, Error> {
        let sql = format!(
            "SELECT {} FROM sessions WHERE {filter} ORDER BY created_at_ms, id",
            rows::COLUMNS
        );
        let mut stmt = self.conn.prepare_cached(&sql).map_err(self.query_error())?;
        let raw = stmt
            .query_map(rusqlite::params_from_iter(args), rows::read)
            .map_err(self.query_error())?
            .collect::<Result<Vec<_>, _>>()
            .map_err(self.query_error())?;
        Ok(raw.into_iter().filter_map(rows::decode).collect())
    }

    /// Record the runtime handle (an intent before creating, the full handle after).
    pub fn set_runtime(&self, id: &SessionId, runtime: &Runtime, now_ms: i64) -> Result<(), Error> {
        let (kind, handle) = rows::encode_runtime(runtime);
        let changed = self
            .conn
            .execute(
                "UPDATE sessions SET runtime_kind = ?2, runtime_handle = ?3, updated_at_ms = ?4
                 WHERE id = ?1",
                params![id.as_str(), kind, handle, now_ms],
            )
            .map_err(self.query_error())?;
        self.changed_one(id, changed)
    }

    /// `spawning` or `saved` → `running`, with the handle of the runtime that now runs it.
    pub fn mark_running(
        &self,
        id: &SessionId,
        runtime: &Runtime,
        now_ms: i64,
    ) -> Result<(), Error> {
        let (kind, handle) = rows::encode_runtime(runtime);
        let changed = self
            .conn
            .execute(
                "UPDATE sessions SET state = 'running', runtime_kind = ?2, runtime_handle = ?3,
                    updated_at_ms = ?4
                 WHERE id = ?1 AND state IN ('spawning', 'saved', 'running')",
                params![id.as_str(), kind, handle, now_ms],
            )
            .map_err(self.query_error())?;
        self.transition(id, changed, "spawning, saved or running")
    }

    /// `running` → `saved`: torn down by a clean shutdown, to be restored at the next boot.
    pub fn mark_saved(&self, id: &SessionId, now_ms: i64) -> Result<(), Error> {
        let changed = self
            .conn
            .execute(
                "UPDATE sessions SET state = 'saved', updated_at_ms = ?2
                 WHERE id = ?1 AND state IN ('running', 'saved')",
                params![id.as_str(), now_ms],
            )
            .map_err(self.query_error())?;
        self.transition(id, changed, "running")
    }

    /// Any state → `terminated`, with the reason and the ref holding preserved work. Terminating
    /// a terminated row keeps its first reason and ref, unless a ref is given now.
    pub fn terminate(
        &self,
        id: &SessionId,
        reason: &str,
        preserved_ref: Option<&str>,
        now_ms: i64,
    ) -> Result<(), Error> {
        let changed = self
            .conn
            .execute(
                "UPDATE sessions SET
                    state = 'terminated',
                    end_reason = COALESCE(end_reason, ?2),
                    preserved_ref = COALESCE(?3, preserved_ref),
                    ended_at_ms = COALESCE(ended_at_ms, ?4),
                    updated_at_ms = ?4
                 WHERE id = ?1",
                params![id.as_str(), reason, preserved_ref, now_ms],
            )
            .map_err(self.query_error())?;
        self.changed_one(id, changed)
    }

    fn changed_one(&self, id: &SessionId, changed: usize) -> Result<(), Error> {
        if changed == 1 {
            Ok(())
        } else {
            Err(Error::NotFound { id: id.clone() })
        }
    }

    fn transition(
        &self,
        id: &SessionId,
        changed: usize,
        expected: &'static str,
    ) -> Result<(), Error> {
        if changed == 1 {
            return Ok(());
        }
        match self.get(id)? {
            None => Err(Error::NotFound { id: id.clone() }),
            Some(s) => Err(Error::WrongState {
                id: id.clone(),
                expected,
                actual: s.state,
            }),
        }
    }

    /// Run `f` in one transaction: all of its changes land, or none.
    pub fn transaction<T>(
        &mut self,
        f: impl FnOnce(&Store) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .map_err(self.query_error())?;
        match f(self) {
            Ok(value) => {
                self.conn
                    .execute_batch("COMMIT")
                    .map_err(self.query_error())?;
                Ok(value)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }
}
