//! The headless takeover shared by `reconcile takeover` and `reconcile-launcher --takeover`:
//! progress in words on stderr, the outcome on stdout (one JSON object with `--json`).

use std::path::Path;

use crate::{Action, Config, Error, Outcome, Progress, restart, takeover};

/// Run a takeover (or, with `restart`, a graceful replace) for the environment's state directory
/// with the daemon binary beside `current_exe`, printing as the CLI does.
pub fn headless(current_exe: &Path, json: bool, restart_daemon: bool) -> Result<Outcome, Error> {
    let config = Config::from_env(current_exe)?;
    let mut progress = |p: Progress| {
        if !json {
            eprintln!("{}", describe(&p));
        }
    };
    let outcome = if restart_daemon {
        restart(&config, &mut progress)?
    } else {
        takeover(&config, &mut progress)?
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&outcome).expect("an outcome always serializes")
        );
    } else {
        let verb = match outcome.action {
            Action::Reused => "reused",
            Action::Replaced => "replaced; now",
            Action::Spawned => "started",
        };
        println!(
            "daemon {verb} pid {} on port {}, ready ({} ms)",
            outcome.pid, outcome.port, outcome.elapsed_ms
        );
    }
    Ok(outcome)
}

/// A progress step in words.
pub fn describe(progress: &Progress) -> String {
    match progress {
        Progress::Probing => "probing the daemon".to_owned(),
        Progress::Replacing { pid, because } => format!("replacing daemon {pid} ({because:?})"),
        Progress::Spawning => "starting a daemon".to_owned(),
        Progress::Reconciling { pid } => format!("daemon {pid} is reconciling"),
    }
}
