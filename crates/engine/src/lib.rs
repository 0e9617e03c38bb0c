//! Reconcile's engine: the boot reconcile (live, reap and restore passes) and the session
//! lifecycle, wiring the pure decisions of `reconcile-core` to the adapters (SQLite, tmux, git,
//! /proc).
//!
//! Every decision is made by `reconcile_core::classify`; this crate gathers the evidence, applies
//! the decision, and records what happened.

mod host;
mod orphans;
mod reconcile;
mod runtime;
mod session;

pub use host::Host;
pub use reconcile::{reconcile, sweep};
pub use session::{NewSessionRequest, create_session, save_all, stop_session};

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] reconcile_store::Error),
    #[error(transparent)]
    Git(#[from] reconcile_git::Error),
    #[error(transparent)]
    Tmux(#[from] reconcile_tmux::Error),
    #[error(transparent)]
    Proc(#[from] reconcile_proc::Error),
    #[error(transparent)]
    Home(#[from] reconcile_home::Error),
    #[error("the command is empty: give the program to run and its arguments")]
    EmptyCommand,
    #[error("command not found: {program} (not an executable file, nor on PATH)")]
    CommandNotFound { program: String },
    #[error("the repository path {path} does not exist")]
    NoSuchRepository { path: PathBuf },
    #[error("no session {id}")]
    NoSuchSession { id: reconcile_core::SessionId },
    #[error("session {id} is {state}; only a running session can be stopped")]
    CannotStop {
        id: reconcile_core::SessionId,
        state: reconcile_core::SessionState,
    },
    #[error("session {id} could not be stopped: {message}")]
    StopFailed {
        id: reconcile_core::SessionId,
        message: String,
    },
    #[error("cannot create a session id: {source}")]
    Random { source: getrandom::Error },
}
