//! Spawning the daemon: detached (it starts its own session), stdin from /dev/null, output to the
//! log directory, then waiting for `/readyz` within a deadline.

use std::fs::{self, File};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reconcile_api::Client;
use reconcile_home::{HOME_VAR, Home, PORT_VAR};

use crate::Error;
use crate::run::Config;

pub(crate) fn spawn(config: &Config) -> Result<Child, Error> {
    let spawn_error = |source| Error::Spawn {
        path: config.daemon.clone(),
        source,
    };
    let out = File::options()
        .create(true)
        .append(true)
        .open(config.home.daemon_output())
        .map_err(spawn_error)?;
    let err = out.try_clone().map_err(spawn_error)?;
    let child = Command::new(&config.daemon)
        .env(HOME_VAR, config.home.root())
        .env(PORT_VAR, config.port.to_string())
        // Started from inside a session, the launcher carries that session's marker and token;
        // the daemon must not, or it would count as one of that session's processes.
        .env_remove(reconcile_core::OwnerMarker::VAR)
        .env_remove("RECONCILE_RESUME_TOKEN")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(spawn_error)?;
    tracing::info!(pid = child.id(), daemon = %config.daemon.display(), "spawned the daemon");
    Ok(child)
}

/// Poll `/readyz` until it answers 200, the daemon exits, or the deadline passes.
pub(crate) fn wait_ready(config: &Config, mut child: Child) -> Result<Child, Error> {
    let probe = Client::with_timeout(config.port, String::new(), Duration::from_secs(2));
    let deadline = Instant::now() + config.ready_deadline;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::DaemonExited {
                status: status.to_string(),
                log: last_log_lines(&config.home, 20),
            });
        }
        if probe.ready().unwrap_or(false) {
            return Ok(child);
        }
        if Instant::now() > deadline {
            return Err(Error::NotReady {
                seconds: config.ready_deadline.as_secs(),
                log: last_log_lines(&config.home, 20),
            });
        }
        std::thread::park_timeout(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// The last `n` lines of the daemon's newest log, and of its output file (where a start-up
/// error lands). Tokens never reach either.
pub fn last_log_lines(home: &Home, n: usize) -> String {
    let logs = home.logs();
    let newest_log = fs::read_dir(&logs).ok().and_then(|entries| {
        entries
            .flatten()
            .filter(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("reconciled.") && name.ends_with(".log")
            })
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
            .map(|e| e.path())
    });
    let mut lines = Vec::new();
    for path in newest_log.into_iter().chain([home.daemon_output()]) {
        if let Ok(text) = fs::read_to_string(&path) {
            let tail: Vec<&str> = text.lines().rev().take(n).collect();
            lines.extend(tail.into_iter().rev().map(|l| format!("  {l}")));
        }
    }
    if lines.is_empty() {
        format!("  (no log in {})", logs.display())
    } else {
        lines.join("\n")
    }
}
