//! The one error type of the core: values that do not parse into domain types.

/// A value from outside (a database column, a request) that is not a valid domain value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("invalid session id {value:?}: use 1 to 64 characters from a-z, 0-9 and '-'")]
    InvalidSessionId { value: String },
    #[error("unknown session state {value:?} (expected spawning, running, saved or terminated)")]
    UnknownState { value: String },
    #[error("unknown runtime kind {value:?} (expected tmux, process or remote)")]
    UnknownRuntimeKind { value: String },
    #[error("invalid {kind} id {value:?}: use 1 to 64 characters from a-z, 0-9 and '-'")]
    InvalidId { kind: &'static str, value: String },
    #[error("unknown {kind} state {value:?} (expected {expected})")]
    UnknownPoolState {
        kind: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("invalid ownership marker {value:?}: expected <instance_id>/<session_id>")]
    InvalidMarker { value: String },
}
