//! Reconcile's engine: the boot reconcile (live, reap and restore passes) and the session
//! lifecycle, wiring the pure decisions of `reconcile-core` to the adapters (SQLite, tmux, git,
//! /proc).
//!
//! Every decision is made by `reconcile_core::classify`; this crate gathers the evidence, applies
//! the decision, and records what happened.

mod host;
mod orphans;
mod pool;
mod reconcile;
mod runtime;
mod session;
mod window;

pub use host::Host;
pub use pool::pool_pass;
pub use reconcile::{reconcile, sweep};
pub use session::{NewSessionRequest, create_session, save_all, stop_session};
pub use window::{
    DEFAULT_TTL_MS, MAX_SLOTS, SESSION_LEASE_TTL_MS, acquire_lease, close_window, open_window,
    provision_slot, provisioning_plan, release_lease, renew_lease,
};

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
    #[error("cannot create an id: {source}")]
    Random { source: getrandom::Error },
    #[error("a window keeps 1 to {max} slots, not {given}")]
    InvalidSlots { given: u32, max: u32 },
    #[error("no window {id}")]
    NoSuchWindow { id: reconcile_core::WindowId },
    #[error("window {id} is {state}; only an open window hands out slots")]
    WindowNotOpen {
        id: reconcile_core::WindowId,
        state: reconcile_core::WindowState,
    },
    #[error(
        "window {window} has no free slot right now; more are being provisioned, so retry in a \
         moment, or start the session without a window"
    )]
    NoFreeSlot { window: reconcile_core::WindowId },
    #[error(
        "{given} is not window {window}'s repository ({repo}); leave out the repository or give that one"
    )]
    WrongRepository {
        window: reconcile_core::WindowId,
        given: PathBuf,
        repo: PathBuf,
    },
    #[error("no lease {id} (it was released, or reaped after its heartbeat went stale)")]
    NoSuchLease { id: reconcile_core::LeaseId },
    #[error("lease {id} is held by the daemon for session {session}; stop the session instead")]
    SessionLease {
        id: reconcile_core::LeaseId,
        session: reconcile_core::SessionId,
    },
    #[error("a lease needs an owner: 1 to 200 characters naming who holds it")]
    InvalidOwner,
    #[error("a lease's ttl_ms must be between {min} and {max}, not {given}")]
    InvalidTtl { given: i64, min: i64, max: i64 },
    #[error("slot {id} disappeared while it was being provisioned")]
    SlotVanished { id: reconcile_core::SlotId },
}
