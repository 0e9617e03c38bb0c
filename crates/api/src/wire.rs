//! JSON shapes of the HTTP API. Nothing here carries a secret out: a resume token goes in (in
//! `CreateSession`) and never comes back.

use std::fmt;

use reconcile_core::{Report, Runtime, RuntimeKind, Session, SessionState};
use serde::{Deserialize, Serialize};

/// `GET /healthz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    pub status: String,
    pub pid: u32,
    pub instance_id: String,
    pub version: String,
}

/// `GET /readyz`: `ready` (200) or `reconciling` (503).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    pub status: String,
}

/// `POST /v1/sessions`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    pub repo: String,
    #[serde(default)]
    pub name: Option<String>,
    /// argv: the program and its arguments.
    pub command: Vec<String>,
    /// Handed to the command in `RECONCILE_RESUME_TOKEN`; stored, shown nowhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
    /// A window whose warm slot to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
}

impl fmt::Debug for CreateSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreateSession")
            .field("repo", &self.repo)
            .field("name", &self.name)
            .field("command", &self.command)
            .field(
                "resume_token",
                &self.resume_token.as_ref().map(|_| "[redacted]"),
            )
            .field("window", &self.window)
            .finish()
    }
}

/// `POST /v1/daemon/stop`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopDaemon {
    #[serde(default)]
    pub stop_sessions: bool,
}

/// One session as the API shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionView {
    pub id: String,
    pub name: Option<String>,
    pub state: SessionState,
    pub repo: String,
    pub branch: String,
    pub worktree: String,
    pub runtime: RuntimeKind,
    /// The tmux session's name, for tmux sessions.
    pub tmux_session: Option<String>,
    /// The command to attach to it from a terminal.
    pub attach: Option<String>,
    pub command: Vec<String>,
    pub has_resume_token: bool,
    pub preserved_ref: Option<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    pub end_reason: Option<String>,
}

impl SessionView {
    /// The view of `session`; `tmux_socket` builds the attach command.
    pub fn new(session: &Session, tmux_socket: &str) -> SessionView {
        let tmux_session = match &session.runtime {
            Runtime::Tmux(handle) => Some(handle.name.clone()),
            _ => None,
        };
        let attach = tmux_session
            .as_ref()
            .filter(|_| session.state == SessionState::Running)
            .map(|name| format!("tmux -L {tmux_socket} attach -t ={name}"));
        SessionView {
            id: session.id.to_string(),
            name: session.name.clone(),
            state: session.state,
            repo: session.repo.display().to_string(),
            branch: session.branch.clone(),
            worktree: session.worktree.display().to_string(),
            runtime: session.runtime.kind(),
            tmux_session,
            attach,
            command: session.command.clone(),
            has_resume_token: session.resume_token.is_some(),
            preserved_ref: session.preserved_ref.clone(),
            created_at_ms: session.created_at_ms,
            updated_at_ms: session.updated_at_ms,
            ended_at_ms: session.ended_at_ms,
            end_reason: session.end_reason.clone(),
        }
    }
}

/// `GET /v1/report`: the last reconcile report (the boot reconcile, or a later sweep that acted).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportView {
    /// `boot` or `sweep`.
    pub kind: String,
    pub finished_at_ms: i64,
    #[serde(flatten)]
    pub report: Report,
}

/// Machine-readable error codes; clients branch on these, never on message text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Unauthorized,
    ForbiddenHost,
    InvalidRequest,
    BodyTooLarge,
    NotARepository,
    NoCommits,
    CommandNotFound,
    NotFound,
    Conflict,
    NotReady,
    /// The window has no free slot right now.
    NoFreeSlot,
    Unsupported,
    Internal,
}

/// Every error response: `{code, message}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

/// One item of `GET /v1/events` (server-sent events; the SSE event name is the `type`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A session was created or changed state.
    Session { session: SessionView },
    /// A reconcile started (`report` is `None`) or finished.
    Reconcile {
        kind: String,
        report: Option<Report>,
    },
    /// A window was opened, provisioned a slot, or changed: its whole pool as it is now.
    Window { window: crate::WindowView },
    /// The daemon is shutting down.
    Stopping { stop_sessions: bool },
}

impl Event {
    pub fn name(&self) -> &'static str {
        match self {
            Event::Session { .. } => "session",
            Event::Reconcile { .. } => "reconcile",
            Event::Window { .. } => "window",
            Event::Stopping { .. } => "stopping",
        }
    }
}
