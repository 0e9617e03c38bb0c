//! The one error type the window sees: `{code, message}`, where `code` is the daemon's own error
//! code when the daemon answered, or one of the launcher's. The UI branches on `code` only.

use reconcile_api::{ClientError, ErrorCode};
use serde::{Serialize, Serializer};

/// Why a command failed, for the UI to branch on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// No daemon runs (yet): the launcher is starting or replacing it.
    NoDaemon,
    /// The run-file names a daemon that does not answer.
    DaemonUnreachable,
    /// The daemon answered with an error; its code.
    Daemon(ErrorCode),
    /// The request was malformed before it reached the daemon.
    InvalidRequest,
    Internal,
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Code::NoDaemon => s.serialize_str("no_daemon"),
            Code::DaemonUnreachable => s.serialize_str("daemon_unreachable"),
            Code::InvalidRequest => s.serialize_str("invalid_request"),
            Code::Internal => s.serialize_str("internal"),
            Code::Daemon(code) => code.serialize(s),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct UiError {
    pub code: Code,
    pub message: String,
}

impl UiError {
    pub fn new(code: Code, message: impl Into<String>) -> UiError {
        UiError {
            code,
            message: message.into(),
        }
    }
}

impl From<ClientError> for UiError {
    fn from(e: ClientError) -> UiError {
        let code = match &e {
            ClientError::NoDaemon { .. } => Code::NoDaemon,
            ClientError::Unreachable { .. } => Code::DaemonUnreachable,
            ClientError::Api { body, .. } => Code::Daemon(body.code),
            ClientError::Unexpected { .. } => Code::Internal,
        };
        // Client errors name ports, paths and daemon messages, never the token.
        UiError::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_serialize_flat() {
        let e = UiError::new(Code::Daemon(ErrorCode::NotARepository), "x");
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":"not_a_repository","message":"x"}"#
        );
        let e = UiError::new(Code::NoDaemon, "y");
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"code":"no_daemon","message":"y"}"#
        );
    }
}
