//! `reconciled`: the daemon. Takes the single-instance lock, binds the loopback port, writes the
//! run-file, serves the API, and reconciles the sessions before it reports ready.
//!
//! Every error ends here, printed once with its context chain, and maps to exit code 1.

mod api;
mod logging;
mod provision;
mod serve;
mod startup;
mod state;
mod windows;

use std::process::ExitCode;

use clap::Parser;

/// Owns Reconcile's sessions: reconciles them at every boot and serves the loopback API.
///
/// Configured by the environment: RECONCILE_HOME, RECONCILE_PORT, RECONCILE_TMUX_SOCKET.
#[derive(Debug, Parser)]
#[command(name = "reconciled", version)]
struct Args {}

fn main() -> ExitCode {
    startup::close_inherited_descriptors();
    let Args {} = Args::parse();
    match serve::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "reconciled stopped with an error");
            eprintln!("reconciled: {e:#}");
            ExitCode::FAILURE
        }
    }
}
