//! The takeover: look, plan, act, until one healthy, ready daemon of ours serves the state
//! directory. Everything happens under the takeover lock.

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use reconcile_api::remove_run_file_if_ours;
use reconcile_core::{ReplaceBecause, TakeoverPlan, plan_daemon_takeover};
use reconcile_home::Home;
use reconcile_proc::{Holder, failpoint, port_holder};
use serde::Serialize;

use crate::{Error, lock, observe, spawn};

/// How long a launcher queues behind another one's takeover.
const LOCK_TIMEOUT: Duration = Duration::from_secs(180);
/// How long a stopped daemon's port may stay held.
const PORT_FREE_TIMEOUT: Duration = Duration::from_secs(10);
/// Replacing or spawning more often than this in one takeover means something else interferes.
const MAX_ACTIONS: u32 = 4;

/// Where and what to take over.
#[derive(Clone, Debug)]
pub struct Config {
    pub home: Home,
    pub port: u16,
    /// The `reconciled` binary to spawn.
    pub daemon: PathBuf,
    /// How long a daemon may take to become ready (its boot reconcile) before it is replaced.
    pub ready_deadline: Duration,
    /// How long a replaced daemon gets between SIGTERM and SIGKILL.
    pub stop_grace: Duration,
}

impl Config {
    /// From the environment: `RECONCILE_HOME`, `RECONCILE_PORT`, `RECONCILE_DAEMON` (else the
    /// `reconciled` beside `current_exe`).
    pub fn from_env(current_exe: &std::path::Path) -> Result<Config, Error> {
        Ok(Config {
            home: Home::from_env()?,
            port: reconcile_home::port()?,
            daemon: reconcile_home::daemon_binary(current_exe),
            ready_deadline: Duration::from_secs(60),
            stop_grace: Duration::from_secs(5),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Reused,
    Replaced,
    Spawned,
}

/// One ready daemon of ours.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub action: Action,
    pub pid: u32,
    pub port: u16,
    pub elapsed_ms: u64,
    /// The daemon, when this takeover spawned it: reap it when it exits.
    #[serde(skip)]
    pub child: Option<Child>,
}

/// What the takeover is doing, for a progress display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    Probing,
    Replacing {
        pid: u32,
        because: ReplaceBecause,
    },
    Spawning,
    /// Waiting for the daemon's boot reconcile.
    Reconciling {
        pid: u32,
    },
}

/// End with exactly one healthy, ready daemon of ours: reuse, wait for, replace or spawn it.
pub fn takeover(config: &Config, progress: &mut dyn FnMut(Progress)) -> Result<Outcome, Error> {
    drive(config, false, progress)
}

/// A graceful restart: our daemon (if one runs) gets SIGTERM, which leaves its sessions running,
/// and a new one adopts them.
pub fn restart(config: &Config, progress: &mut dyn FnMut(Progress)) -> Result<Outcome, Error> {
    drive(config, true, progress)
}

fn drive(
    config: &Config,
    mut restart: bool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Outcome, Error> {
    let started = Instant::now();
    config.home.ensure()?;
    let _lock = lock(&config.home, LOCK_TIMEOUT)?;
    failpoint::hit("takeover.after_lock");
    let boot_id = reconcile_proc::boot_id()?;
    let mut action = Action::Reused;
    let mut child = None;
    let mut waiting_since: Option<Instant> = None;
    let mut actions = 0;
    loop {
        progress(Progress::Probing);
        let waited = waiting_since.map_or(Duration::ZERO, |t| t.elapsed());
        let look = observe::look(config, &boot_id, waited, restart);
        let plan = plan_daemon_takeover(&look.seen);
        tracing::info!(?plan, "takeover plan");
        if matches!(
            plan,
            TakeoverPlan::Replace { .. } | TakeoverPlan::Spawn { .. }
        ) {
            actions += 1;
            if actions > MAX_ACTIONS {
                return Err(Error::NoProgress {
                    steps: actions,
                    plan: format!("{plan:?}"),
                });
            }
        }
        match plan {
            TakeoverPlan::Reuse { pid } => {
                return Ok(Outcome {
                    action,
                    pid,
                    port: config.port,
                    elapsed_ms: started.elapsed().as_millis() as u64,
                    child,
                });
            }
            TakeoverPlan::WaitForReady { pid } | TakeoverPlan::WaitForStart { pid } => {
                waiting_since.get_or_insert_with(Instant::now);
                progress(Progress::Reconciling { pid });
                // Polling with a deadline: the planner replaces the daemon once it has passed.
                std::thread::park_timeout(Duration::from_millis(100));
            }
            TakeoverPlan::Replace { daemon, because } => {
                progress(Progress::Replacing {
                    pid: daemon.pid,
                    because,
                });
                tracing::warn!(pid = daemon.pid, ?because, "replacing the daemon");
                reconcile_proc::stop_process_group(&boot_id, &daemon, config.stop_grace).map_err(
                    |source| Error::Stop {
                        pid: daemon.pid,
                        source,
                    },
                )?;
                failpoint::hit("takeover.after_stop");
                wait_port_free(config, &boot_id)?;
                remove_run_file_if_ours(&config.home.run_file(), daemon.pid);
                action = Action::Replaced;
                restart = false;
                waiting_since = None;
            }
            TakeoverPlan::Spawn { remove_run_file } => {
                if let (true, Some(run)) = (remove_run_file, &look.run) {
                    // It names a dead or unrelated process: nobody is signalled, the file goes.
                    remove_run_file_if_ours(&config.home.run_file(), run.pid);
                }
                progress(Progress::Spawning);
                let spawned = spawn::spawn(config)?;
                failpoint::hit("takeover.after_spawn");
                progress(Progress::Reconciling { pid: spawned.id() });
                child = Some(spawn::wait_ready(config, spawned)?);
                if action == Action::Reused {
                    action = Action::Spawned;
                }
                restart = false;
                waiting_since = None;
            }
            TakeoverPlan::Refuse(because) => return Err(Error::Refused(because)),
        }
    }
}

/// Poll until nothing listens on the port.
fn wait_port_free(config: &Config, boot_id: &str) -> Result<(), Error> {
    let deadline = Instant::now() + PORT_FREE_TIMEOUT;
    loop {
        if matches!(port_holder(boot_id, config.port), Ok(Holder::Nobody)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Error::PortStillHeld {
                port: config.port,
                seconds: PORT_FREE_TIMEOUT.as_secs(),
            });
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
}
