//! The outside contract of `reconciled` (`../shared/CONTRACT.md`): the run-file, the JSON shapes
//! of the HTTP API and its error codes, and a blocking client for the CLI and launcher.
//!
//! Transport types live here and only here; the daemon converts domain types into them at its
//! edge, so a field added to a domain type never leaks onto the wire by accident.

mod client;
mod pool;
mod runfile;
mod wire;

pub use client::{Client, ClientError};
pub use pool::{AcquireLease, LeaseView, OpenWindow, Released, SlotView, WindowView};
pub use runfile::{RunFile, RunFileError, read_run_file, remove_run_file_if_ours, write_run_file};
pub use wire::{
    CreateSession, ErrorBody, ErrorCode, Event, Health, Ready, ReportView, SessionView, StopDaemon,
};

/// This build's version, reported by `/healthz` and written in the run-file.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
