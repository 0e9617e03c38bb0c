//! Encoding of session rows: columns to domain types and back.

use std::path::{Path, PathBuf};

use reconcile_core::{
    ProcessIdentity, Runtime, RuntimeKind, Secret, Session, SessionId, SessionState, TmuxHandle,
};

/// What a create knows before any side effect: the row written in `spawning`.
#[derive(Clone, Debug)]
pub struct NewSession {
    pub id: SessionId,
    pub name: Option<String>,
    pub repo: PathBuf,
    pub branch: String,
    pub worktree: PathBuf,
    pub runtime: Runtime,
    pub command: Vec<String>,
    pub resume_token: Option<Secret>,
}

pub(crate) const COLUMNS: &str = "id, name, repo, branch, worktree, runtime_kind, runtime_handle, \
    command, resume_token, state, created_at_ms, updated_at_ms, ended_at_ms, end_reason, preserved_ref";

/// A row as SQLite holds it, before decoding.
pub(crate) struct RawRow {
    id: String,
    name: Option<String>,
    repo: String,
    branch: String,
    worktree: String,
    runtime_kind: String,
    runtime_handle: Option<String>,
    command: String,
    resume_token: Option<String>,
    state: String,
    created_at_ms: i64,
    updated_at_ms: i64,
    ended_at_ms: Option<i64>,
    end_reason: Option<String>,
    preserved_ref: Option<String>,
}

pub(crate) fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRow> {
    Ok(RawRow {
        id: row.get(0)?,
        name: row.get(1)?,
        repo: row.get(2)?,
        branch: row.get(3)?,
        worktree: row.get(4)?,
        runtime_kind: row.get(5)?,
        runtime_handle: row.get(6)?,
        command: row.get(7)?,
        resume_token: row.get(8)?,
        state: row.get(9)?,
        created_at_ms: row.get(10)?,
        updated_at_ms: row.get(11)?,
        ended_at_ms: row.get(12)?,
        end_reason: row.get(13)?,
        preserved_ref: row.get(14)?,
    })
}

/// Decode a row. A row whose id or state cannot be read is skipped (and logged), never
/// rewritten; an unreadable handle becomes [`Runtime::Unreadable`], which proves nothing.
pub(crate) fn decode(raw: RawRow) -> Option<Session> {
    let id = match SessionId::parse(&raw.id) {
        Ok(id) => id,
        Err(e) => {
            tracing::warn!(error = %e, "skipping a session row with an unreadable id");
            return None;
        }
    };
    let state = match raw.state.parse::<SessionState>() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(session = %id, error = %e, "skipping a session row with an unreadable state");
            return None;
        }
    };
    let runtime = decode_runtime(&raw.runtime_kind, raw.runtime_handle.as_deref());
    if let Runtime::Unreadable(kind) = &runtime {
        tracing::warn!(session = %id, kind = kind.as_str(), "session row has an unreadable runtime handle");
    }
    let command = serde_json::from_str(&raw.command).unwrap_or_else(|_| {
        tracing::warn!(session = %id, "session row has an unreadable command");
        Vec::new()
    });
    Some(Session {
        id,
        name: raw.name,
        repo: PathBuf::from(raw.repo),
        branch: raw.branch,
        worktree: PathBuf::from(raw.worktree),
        runtime,
        command,
        resume_token: raw.resume_token.map(Secret::new),
        state,
        created_at_ms: raw.created_at_ms,
        updated_at_ms: raw.updated_at_ms,
        ended_at_ms: raw.ended_at_ms,
        end_reason: raw.end_reason,
        preserved_ref: raw.preserved_ref,
    })
}

#[derive(serde::Serialize, serde::Deserialize)]
struct RemoteHandle {
    host: String,
}

fn decode_runtime(kind: &str, handle: Option<&str>) -> Runtime {
    let Ok(kind) = kind.parse::<RuntimeKind>() else {
        return Runtime::Unreadable(RuntimeKind::Remote);
    };
    let unreadable = Runtime::Unreadable(kind);
    match (kind, handle) {
        (RuntimeKind::Tmux, Some(json)) => serde_json::from_str::<TmuxHandle>(json)
            .map(Runtime::Tmux)
            .unwrap_or(unreadable),
        (RuntimeKind::Process, None) => Runtime::Process(None),
        (RuntimeKind::Process, Some(json)) => serde_json::from_str::<ProcessIdentity>(json)
            .map(|p| Runtime::Process(Some(p)))
            .unwrap_or(unreadable),
        (RuntimeKind::Remote, Some(json)) => serde_json::from_str::<RemoteHandle>(json)
            .map(|r| Runtime::Remote { host: r.host })
            .unwrap_or(unreadable),
        (RuntimeKind::Tmux | RuntimeKind::Remote, None) => unreadable,
    }
}

pub(crate) fn encode_runtime(runtime: &Runtime) -> (&'static str, Option<String>) {
    let json = |v: Result<String, serde_json::Error>| v.ok();
    match runtime {
        Runtime::Tmux(h) => ("tmux", json(serde_json::to_string(h))),
        Runtime::Process(None) => ("process", None),
        Runtime::Process(Some(p)) => ("process", json(serde_json::to_string(p))),
        Runtime::Remote { host } => (
            "remote",
            json(serde_json::to_string(&RemoteHandle { host: host.clone() })),
        ),
        Runtime::Unreadable(kind) => (kind.as_str(), None),
    }
}

pub(crate) fn encode_command(argv: &[String]) -> String {
    serde_json::to_string(argv).unwrap_or_else(|_| "[]".to_owned())
}

pub(crate) fn path_text(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
