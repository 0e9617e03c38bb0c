//! Daemon takeover and supervision, with no GUI dependency: used by `reconcile takeover`,
//! `reconcile supervise` and the desktop launcher alike.
//!
//! Whatever state the last daemon left behind (dead, stopped, hung, racing, its run-file
//! mangled), [`takeover`] ends with exactly one healthy, ready daemon, and never signals a process
//! it cannot prove is this state directory's daemon. Decisions come from
//! `reconcile_core::plan_daemon_takeover`; this crate observes and acts.

mod headless;
mod lock;
mod observe;
mod run;
mod spawn;
mod supervise;

pub use headless::{describe, headless};
pub use lock::{TakeoverLock, lock};
pub use run::{Action, Config, Outcome, Progress, restart, takeover};
pub use spawn::last_log_lines;
pub use supervise::{Supervised, supervise};

use std::io;
use std::path::PathBuf;

use reconcile_core::RefuseBecause;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The port belongs to something that is not ours: nothing was signalled.
    #[error("{0}")]
    Refused(RefuseBecause),
    #[error(
        "the state directory {dir} disappeared while waiting for the takeover lock; nothing was done"
    )]
    LockDirVanished { dir: PathBuf },
    #[error("another launcher held the takeover lock for more than {seconds} s; nothing was done")]
    LockTimeout { seconds: u64 },
    #[error("cannot use the takeover lock {path}: {source}")]
    Lock { path: PathBuf, source: io::Error },
    #[error("cannot start the daemon {path}: {source}")]
    Spawn { path: PathBuf, source: io::Error },
    #[error("the daemon exited during start-up ({status}); its last log lines:\n{log}")]
    DaemonExited { status: String, log: String },
    #[error("the daemon did not become ready within {seconds} s; its last log lines:\n{log}")]
    NotReady { seconds: u64, log: String },
    #[error("daemon {pid} could not be stopped: {source}")]
    Stop {
        pid: u32,
        source: reconcile_proc::Error,
    },
    #[error("port {port} was still held {seconds} s after its daemon stopped")]
    PortStillHeld { port: u16, seconds: u64 },
    #[error("the takeover did not settle after {steps} steps; last plan: {plan}")]
    NoProgress { steps: u32, plan: String },
    #[error(
        "the daemon crashed {count} times within {window_s} s; not restarting it again. Its last log lines:\n{log}"
    )]
    CrashLoop {
        count: usize,
        window_s: u64,
        log: String,
    },
    #[error(transparent)]
    Proc(#[from] reconcile_proc::Error),
    #[error(transparent)]
    Home(#[from] reconcile_home::Error),
}

impl Error {
    /// The exit code of `reconcile takeover`: 2 when refused, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Refused(
                reconcile_core::RefuseBecause::ForeignHolder { .. }
                | reconcile_core::RefuseBecause::UnknownHolder,
            ) => 2,
            _ => 1,
        }
    }
}
