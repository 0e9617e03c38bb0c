//! `reconcile`: the command line. Finds the daemon through the run-file and speaks its API.
//!
//! Every error ends in `main`, printed once, with exit code 1.

mod commands;
mod window;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Crash-proof agent sessions: start, list and stop sessions, read the reconcile report, control
/// the daemon.
///
/// Configured by the environment: RECONCILE_HOME, RECONCILE_PORT, RECONCILE_TMUX_SOCKET.
#[derive(Debug, Parser)]
#[command(name = "reconcile", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ensure exactly one healthy, ready daemon: reuse it, wait for it, replace a wedged one, or
    /// start one. Exit 0 when one is ready, 2 when the port belongs to a foreign process, 1 on
    /// any other failure.
    Takeover {
        #[arg(long)]
        json: bool,
    },
    /// Keep the daemon running in the foreground: restart it with backoff when it exits
    /// unexpectedly, stop after a crash loop.
    Supervise,
    /// Start, list and stop sessions.
    #[command(subcommand)]
    Session(SessionCommand),
    /// Windows: a warm pool of worktrees on one repository that sessions start from at once.
    #[command(subcommand)]
    Window(WindowCommand),
    /// The last reconcile report: counts by evidence and decision, warnings, durations.
    Report {
        #[arg(long)]
        json: bool,
    },
    /// Control the daemon.
    #[command(subcommand)]
    Daemon(DaemonCommand),
    /// Whether a daemon runs, and how many sessions it holds.
    Status {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum SessionCommand {
    /// Start COMMAND in a new worktree of REPO, in its own tmux session; prints the session id.
    New {
        /// The git repository to make the session's worktree from (with --window, optional:
        /// the window's repository).
        #[arg(long)]
        repo: Option<String>,
        /// A name to show in listings.
        #[arg(long)]
        name: Option<String>,
        /// Take a warm slot of this window instead of creating a worktree.
        #[arg(long)]
        window: Option<String>,
        /// Handed to the command in RECONCILE_RESUME_TOKEN; `-` reads it from stdin, keeping it
        /// out of argv and shell history.
        #[arg(long)]
        resume_token: Option<String>,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// List sessions.
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// Preserve the session's uncommitted work, stop it and everything it runs, mark it
    /// terminated. The worktree stays.
    Stop { id: String },
}

#[derive(Debug, Subcommand)]
enum WindowCommand {
    /// Open a window on REPO keeping N warm slots (worktrees on fresh branches) ready; provisions
    /// in the background and prints the window id.
    Open {
        #[arg(long)]
        repo: String,
        #[arg(long)]
        slots: u32,
        #[arg(long)]
        name: Option<String>,
        /// Return only once every slot is ready.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits, in seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
    /// List windows and their pools.
    Ls {
        #[arg(long)]
        json: bool,
    },
    /// Close a window: release its leases, remove its unused clean slots; slots holding a
    /// session's work stay until that session ends.
    Close { id: String },
}

#[derive(Debug, Subcommand)]
enum DaemonCommand {
    /// Replace the daemon gracefully with a new one; sessions keep running and are adopted.
    Restart {
        #[arg(long)]
        json: bool,
    },
    /// Stop the daemon gracefully; sessions keep running unless --stop-sessions.
    Stop {
        /// Save every session for restore at the next start, and tear it down first.
        #[arg(long)]
        stop_sessions: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Takeover { json } => commands::takeover(json, false),
        Command::Supervise => commands::supervise(),
        Command::Daemon(DaemonCommand::Restart { json }) => commands::takeover(json, true),
        Command::Session(SessionCommand::New {
            repo,
            name,
            window,
            resume_token,
            command,
        }) => commands::session_new(repo, name, window, resume_token, command),
        Command::Session(SessionCommand::Ls { json }) => commands::session_ls(json),
        Command::Session(SessionCommand::Stop { id }) => commands::session_stop(&id),
        Command::Window(WindowCommand::Open {
            repo,
            slots,
            name,
            wait,
            timeout,
        }) => window::open(
            &repo,
            slots,
            name,
            wait,
            std::time::Duration::from_secs(timeout),
        ),
        Command::Window(WindowCommand::Ls { json }) => window::ls(json),
        Command::Window(WindowCommand::Close { id }) => window::close(&id),
        Command::Report { json } => commands::report(json),
        Command::Daemon(DaemonCommand::Stop { stop_sessions }) => {
            commands::daemon_stop(stop_sessions)
        }
        Command::Status { json } => commands::status(json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reconcile: {e:#}");
            match e.downcast_ref::<reconcile_takeover::Error>() {
                Some(t) => ExitCode::from(t.exit_code()),
                None => ExitCode::FAILURE,
            }
        }
    }
}
