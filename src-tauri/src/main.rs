//! `reconcile-launcher`: the desktop app (takeover, live sessions, tray, supervision), or, with
//! `--takeover [--json]`, the same takeover as `reconcile takeover`, headless. Arguments are read
//! before anything touches GTK or a display.

mod app;
mod commands;
mod daemon;
mod error;
mod tray;

use std::process::ExitCode;

const USAGE: &str = "usage: reconcile-launcher [--takeover [--json]]

Without arguments: the desktop app. It takes over the daemon of $RECONCILE_HOME (reusing a
healthy one, replacing a wedged one, starting one), shows its sessions live, keeps a tray icon
and restarts the daemon if it crashes.

--takeover   ensure exactly one healthy, ready daemon, headless (no display needed), and exit:
             0 when one is ready, 2 when the port belongs to a foreign process, 1 otherwise
--json       with --takeover: print one JSON object {action, pid, port, elapsed_ms}";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|a| a == name);
    if flag("--help") || flag("-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    if flag("--version") {
        println!("reconcile-launcher {}", reconcile_api::VERSION);
        return ExitCode::SUCCESS;
    }
    if let Some(unknown) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--takeover" | "--json"))
    {
        eprintln!("reconcile-launcher: unknown argument {unknown:?}\n\n{USAGE}");
        return ExitCode::from(1);
    }
    if flag("--takeover") {
        return headless_takeover(flag("--json"));
    }
    if flag("--json") {
        eprintln!("reconcile-launcher: --json goes with --takeover\n\n{USAGE}");
        return ExitCode::from(1);
    }
    init_logging();
    match app::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reconcile-launcher: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn headless_takeover(json: bool) -> ExitCode {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("reconcile-launcher: cannot find this program's own path: {e}");
            return ExitCode::FAILURE;
        }
    };
    match reconcile_takeover::headless(&exe, json, false) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reconcile-launcher: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("RECONCILE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
