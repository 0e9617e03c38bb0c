//! Supervision: keep a daemon running, restart it with exponential backoff when it exits
//! unexpectedly, and give up on a crash loop (5 unexpected exits within 60 s).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use reconcile_api::read_run_file;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use crate::run::{Config, Outcome, takeover};
use crate::{Error, last_log_lines, lock};

const CRASH_LIMIT: usize = 5;
const CRASH_WINDOW: Duration = Duration::from_secs(60);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// What supervision is doing, for a display.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Supervised {
    Running {
        pid: u32,
    },
    /// The daemon exited; `unexpected` unless it stopped on request.
    Exited {
        pid: u32,
        unexpected: bool,
    },
    /// A takeover failed; the reason, in words.
    Failed {
        message: String,
    },
    Restarting {
        in_ms: u64,
    },
    CrashLoop {
        log: String,
    },
}

/// Keep a daemon running until it is stopped on request (`reconcile daemon stop`), `should_stop`
/// says so, the port turns out to be someone else's, or it crash-loops.
pub fn supervise(
    config: &Config,
    should_stop: &dyn Fn() -> bool,
    on: &mut dyn FnMut(Supervised),
) -> Result<(), Error> {
    let mut crashes: VecDeque<Instant> = VecDeque::new();
    loop {
        if should_stop() {
            return Ok(());
        }
        match takeover(config, &mut |_| {}) {
            Ok(outcome) => {
                let pid = outcome.pid;
                on(Supervised::Running { pid });
                if !watch(outcome, should_stop) {
                    return Ok(());
                }
                let unexpected = !stopped_on_purpose(config, pid);
                on(Supervised::Exited { pid, unexpected });
                if !unexpected {
                    if restarted_by_someone(config) {
                        continue;
                    }
                    return Ok(());
                }
            }
            Err(e @ Error::Refused(_)) => return Err(e),
            Err(e) => on(Supervised::Failed {
                message: e.to_string(),
            }),
        }
        let now = Instant::now();
        crashes.push_back(now);
        while crashes
            .front()
            .is_some_and(|t| now.duration_since(*t) > CRASH_WINDOW)
        {
            crashes.pop_front();
        }
        if crashes.len() >= CRASH_LIMIT {
            let log = last_log_lines(&config.home, 20);
            on(Supervised::CrashLoop { log: log.clone() });
            return Err(Error::CrashLoop {
                count: crashes.len(),
                window_s: CRASH_WINDOW.as_secs(),
                log,
            });
        }
        let backoff = (FIRST_BACKOFF * 2u32.pow(crashes.len() as u32 - 1)).min(MAX_BACKOFF);
        on(Supervised::Restarting {
            in_ms: backoff.as_millis() as u64,
        });
        // A deliberate backoff between restarts, cut short by a stop request.
        let until = Instant::now() + backoff;
        while Instant::now() < until {
            if should_stop() {
                return Ok(());
            }
            std::thread::park_timeout(Duration::from_millis(50).min(until - Instant::now()));
        }
    }
}

/// Wait for the daemon to exit (through its pidfd). `false` when a stop was requested first.
fn watch(mut outcome: Outcome, should_stop: &dyn Fn() -> bool) -> bool {
    let Some(pid) = Pid::from_raw(outcome.pid as i32) else {
        return true;
    };
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
        // Already gone.
        return true;
    };
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: 250_000_000,
    };
    loop {
        if should_stop() {
            return false;
        }
        let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
        if poll(&mut fds, Some(&tick)).is_ok() && fds[0].revents().contains(PollFlags::IN) {
            if let Some(child) = outcome.child.as_mut() {
                // Ours: reap it, so no zombie is left.
                let _ = child.wait();
            }
            return true;
        }
    }
}

/// A daemon that stopped on request removed its run-file; a crashed one left it naming itself.
fn stopped_on_purpose(config: &Config, pid: u32) -> bool {
    !read_run_file(&config.home.run_file()).is_ok_and(|run| run.pid == pid)
}

/// After a clean exit: did a restart (which holds the takeover lock while it works) leave a new
/// daemon? Waiting for the lock waits for that restart to finish.
fn restarted_by_someone(config: &Config) -> bool {
    let Ok(_lock) = lock(&config.home, Duration::from_secs(180)) else {
        return false;
    };
    let Ok(run) = read_run_file(&config.home.run_file()) else {
        return false;
    };
    let boot = reconcile_proc::boot_id().unwrap_or_default();
    reconcile_proc::identity(&boot, run.pid)
        .ok()
        .flatten()
        .is_some_and(|now| now.start_ticks == run.start_ticks && now.boot_id == run.boot_id)
}
