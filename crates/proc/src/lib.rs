//! Processes as Reconcile sees them: identities and ownership markers read from `/proc`, and
//! child processes (tmux, git) run with a deadline and counted.

pub mod failpoint;
mod identity;
mod locks;
mod port;
mod reap;
mod run;
mod scan;
mod signal;

pub use identity::{boot_id, identity, observe, owner_marker, started_at_ms};
pub use locks::flock_holder;
pub use port::{Holder, PortHolder, port_holder};
pub use reap::{Reaped, Target, reap, reap_instance};
pub use run::{ChildCount, run};
pub use scan::{Marked, Scan, scan_markers};
pub use signal::{Stopped, stop_process, stop_process_group};

use std::io;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot start {program}: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("waiting for {program} failed: {source}")]
    Wait { program: String, source: io::Error },
    #[error("{program} did not finish within {after:?} and was killed")]
    Timeout { program: String, after: Duration },
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot signal process {pid}: {source}")]
    Signal { pid: u32, source: io::Error },
    #[error("process {pid} was still running after SIGKILL")]
    Survived { pid: u32 },
    #[error("{path} has a format this build does not understand")]
    Parse { path: PathBuf },
}
