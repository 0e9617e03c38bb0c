//! Domain types: sessions, their states and runtimes, process identities, secrets.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// A session's id: short, lowercase, safe in tmux names, branch names, refs and paths.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    pub fn parse(value: &str) -> Result<SessionId, Error> {
        if valid_id(value) {
            Ok(SessionId(value.to_owned()))
        } else {
            Err(Error::InvalidSessionId {
                value: value.chars().take(80).collect(),
            })
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name of the tmux session that runs this session.
    pub fn tmux_name(&self) -> String {
        format!("rc-{}", self.0)
    }

    /// The branch a new worktree for this session is created on.
    pub fn branch(&self) -> String {
        format!("reconcile/{}", self.0)
    }

    /// The ref that holds this session's preserved uncommitted work.
    pub fn preserved_ref(&self) -> String {
        format!("refs/reconcile/preserved/{}", self.0)
    }
}

impl TryFrom<String> for SessionId {
    type Error = Error;
    fn try_from(value: String) -> Result<Self, Error> {
        SessionId::parse(&value)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SessionId({})", self.0)
    }
}

/// Ids are 1 to 64 characters of a-z, 0-9 and '-', not starting with '-': safe in tmux names,
/// branch names, refs and paths.
pub(crate) fn valid_id(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && !value.starts_with('-')
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Where a session is in its life. Stored as the lowercase name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SessionState {
    /// The row exists; the worktree or runtime may not yet. A crash here is reconciled.
    Spawning,
    Running,
    /// Torn down by a clean "stop sessions"; the next boot restores it.
    Saved,
    Terminated,
}

impl SessionState {
    pub const ALL: [SessionState; 4] = [
        SessionState::Spawning,
        SessionState::Running,
        SessionState::Saved,
        SessionState::Terminated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Spawning => "spawning",
            SessionState::Running => "running",
            SessionState::Saved => "saved",
            SessionState::Terminated => "terminated",
        }
    }
}

impl FromStr for SessionState {
    type Err = Error;
    fn from_str(value: &str) -> Result<Self, Error> {
        SessionState::ALL
            .into_iter()
            .find(|s| s.as_str() == value)
            .ok_or_else(|| Error::UnknownState {
                value: value.chars().take(40).collect(),
            })
    }
}

impl fmt::Display for SessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What runs a session's command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    Tmux,
    Process,
    Remote,
}

impl RuntimeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Tmux => "tmux",
            RuntimeKind::Process => "process",
            RuntimeKind::Remote => "remote",
        }
    }
}

impl FromStr for RuntimeKind {
    type Err = Error;
    fn from_str(value: &str) -> Result<Self, Error> {
        match value {
            "tmux" => Ok(RuntimeKind::Tmux),
            "process" => Ok(RuntimeKind::Process),
            "remote" => Ok(RuntimeKind::Remote),
            _ => Err(Error::UnknownRuntimeKind {
                value: value.chars().take(40).collect(),
            }),
        }
    }
}

/// A process as it can be proven: the pid alone is not enough, because pids are reused.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcessIdentity {
    /// `/proc/sys/kernel/random/boot_id` when the identity was read.
    pub boot_id: String,
    pub pid: u32,
    /// Field 22 of `/proc/<pid>/stat`: start time in clock ticks since boot.
    pub start_ticks: u64,
}

/// What identifies a tmux session of ours beyond its name.
///
/// `name` is written before the session is created (an intent); the rest is recorded once tmux
/// has created it. A handle with only a name is proven ours by the ownership marker in its pane's
/// environment, never by the name alone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmuxHandle {
    pub name: String,
    /// tmux's own session id, such as `$3`: unique for the lifetime of one server.
    #[serde(default)]
    pub id: Option<String>,
    /// The tmux server that holds the session.
    #[serde(default)]
    pub server: Option<ProcessIdentity>,
    /// The pane's first process (the session's command).
    #[serde(default)]
    pub pane: Option<ProcessIdentity>,
}

impl TmuxHandle {
    /// A handle that only names the session we are about to create.
    pub fn intent(name: String) -> TmuxHandle {
        TmuxHandle {
            name,
            id: None,
            server: None,
            pane: None,
        }
    }

    pub fn is_recorded(&self) -> bool {
        self.id.is_some() && self.server.is_some()
    }
}

/// A session's runtime and its handle, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Runtime {
    Tmux(TmuxHandle),
    /// A local process; `None` when no pid was ever recorded.
    Process(Option<ProcessIdentity>),
    /// Runs elsewhere (ssh, container): never probed, never touched.
    Remote {
        host: String,
    },
    /// The stored handle could not be decoded. Nothing about it is proof of anything.
    Unreadable(RuntimeKind),
}

impl Runtime {
    pub fn kind(&self) -> RuntimeKind {
        match self {
            Runtime::Tmux(_) => RuntimeKind::Tmux,
            Runtime::Process(_) => RuntimeKind::Process,
            Runtime::Remote { .. } => RuntimeKind::Remote,
            Runtime::Unreadable(kind) => *kind,
        }
    }
}

/// A secret (a resume token). Its `Debug` never shows the value and it has no `Display`, so it
/// cannot reach a log line, a report or an error by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Secret {
        Secret(value)
    }

    /// The value, for the one place that hands it on (the command's environment, the database).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// `RECONCILE_OWNER=<instance_id>/<session_id>`: ties a process to a session of one instance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerMarker {
    pub instance: String,
    pub session: SessionId,
}

impl OwnerMarker {
    pub const VAR: &'static str = "RECONCILE_OWNER";

    pub fn parse(value: &str) -> Result<OwnerMarker, Error> {
        let invalid = || Error::InvalidMarker {
            value: value.chars().take(140).collect(),
        };
        let (instance, session) = value.split_once('/').ok_or_else(invalid)?;
        if instance.is_empty() || instance.len() > 64 {
            return Err(invalid());
        }
        let session = SessionId::parse(session).map_err(|_| invalid())?;
        Ok(OwnerMarker {
            instance: instance.to_owned(),
            session,
        })
    }
}

impl fmt::Display for OwnerMarker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.instance, self.session)
    }
}

/// One session row.
#[derive(Clone, Debug)]
pub struct Session {
    pub id: SessionId,
    pub name: Option<String>,
    pub repo: PathBuf,
    pub branch: String,
    pub worktree: PathBuf,
    pub runtime: Runtime,
    /// argv of the command.
    pub command: Vec<String>,
    pub resume_token: Option<Secret>,
    pub state: SessionState,
    /// Unix milliseconds.
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub ended_at_ms: Option<i64>,
    /// Why the session ended, in words safe to show.
    pub end_reason: Option<String>,
    pub preserved_ref: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids() {
        for ok in ["a", "s-0123abcd", "x1-y2"] {
            assert_eq!(SessionId::parse(ok).unwrap().as_str(), ok);
        }
        for bad in ["", "-a", "A", "a/b", "a b", "a.b", &"a".repeat(65)] {
            assert!(SessionId::parse(bad).is_err(), "{bad:?} must be rejected");
        }
    }

    #[test]
    fn secret_debug_is_redacted() {
        let s = Secret::new("tok-abc".into());
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert_eq!(s.expose(), "tok-abc");
    }

    #[test]
    fn markers_round_trip() {
        let m = OwnerMarker::parse("inst1/s-42").unwrap();
        assert_eq!(m.instance, "inst1");
        assert_eq!(m.to_string(), "inst1/s-42");
        for bad in ["", "inst", "/s-1", "inst/", "inst/S"] {
            assert!(OwnerMarker::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn states_round_trip() {
        for s in SessionState::ALL {
            assert_eq!(s.as_str().parse::<SessionState>().unwrap(), s);
        }
        assert!("dead".parse::<SessionState>().is_err());
    }
}
