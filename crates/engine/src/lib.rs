//! Reconcile's engine: the boot reconcile (live, reap and restore passes) and the session
//! lifecycle, wiring the pure decisions of `reconcile-core` to the adapters (SQLite, tmux, git,
//! /proc).
//!
//! Every decision is made by `reconcile_core::classify`; this crate gathers the evidence, applies
//! the decision, and records what happened.

mod failpoint;
mod host;
mod reconcile;
mod session;

pub use host::Host;
pub use reconcile::reconcile;
pub use session::{NewSessionRequest, create_session};

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
    #[error("cannot create a session id: {source}")]
    Random { source: getrandom::Error },
}
