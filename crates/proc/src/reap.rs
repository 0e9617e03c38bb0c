//! Stopping many processes at once, each proven to be the one recorded: pidfds opened first,
//! identity and marker checked through them, SIGTERM and SIGCONT to all, one shared grace, then
//! SIGKILL to whoever is still there; every exit confirmed through its pidfd.

use std::time::{Duration, Instant};

use reconcile_core::{Marker, ProcessIdentity};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

use crate::{identity, owner_marker};

/// At most this many pidfds are open at once.
const BATCH: usize = 256;
/// How long SIGKILLed processes get to be gone.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// A process to stop, and the marker it must still carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub identity: ProcessIdentity,
    pub marker: String,
}

/// What stopping a set of processes did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Exited after SIGTERM.
    pub terminated: u64,
    /// Needed SIGKILL.
    pub killed: u64,
    /// Already gone, or no longer the process recorded (nothing was sent to it).
    pub vanished: u64,
    /// Could not be signalled, or outlived SIGKILL: pids, for a warning.
    pub failed: Vec<u32>,
}

/// Stop every process whose marker names `instance`, for tests cleaning up what they started.
pub fn reap_instance(boot_id: &str, instance: &str, grace: Duration) -> Reaped {
    let prefix = format!("{instance}/");
    let targets: Vec<Target> = crate::scan_markers(boot_id)
        .map(|scan| scan.marked)
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.marker.starts_with(&prefix))
        .map(|m| Target {
            identity: m.identity,
            marker: m.marker,
        })
        .collect();
    reap(boot_id, &targets, grace)
}

/// Stop every target that is still exactly what was recorded.
pub fn reap(boot_id: &str, targets: &[Target], grace: Duration) -> Reaped {
    let mut reaped = Reaped::default();
    for batch in targets.chunks(BATCH) {
        reap_batch(boot_id, batch, grace, &mut reaped);
    }
    reaped
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Running,
    /// Exited before SIGKILL was needed.
    Terminated,
    Killed,
}

struct Open<'a> {
    target: &'a Target,
    pidfd: OwnedFd,
    fate: Fate,
}

fn reap_batch(boot_id: &str, batch: &[Target], grace: Duration, reaped: &mut Reaped) {
    let mut open = Vec::with_capacity(batch.len());
    for target in batch {
        let pid = target.identity.pid;
        let Some(raw) = Pid::from_raw(pid as i32).filter(|_| target.identity.boot_id == boot_id)
        else {
            reaped.vanished += 1;
            continue;
        };
        let pidfd = match pidfd_open(raw, PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(Errno::SRCH) => {
                reaped.vanished += 1;
                continue;
            }
            Err(_) => {
                reaped.failed.push(pid);
                continue;
            }
        };
        // The pidfd pins the process: if identity and marker match now, it is the one recorded.
        let same = identity(boot_id, pid).ok().flatten().as_ref() == Some(&target.identity)
            && owner_marker(pid) == Marker::Present(target.marker.clone());
        if !same {
            reaped.vanished += 1;
            continue;
        }
        open.push(Open {
            target,
            pidfd,
            fate: Fate::Running,
        });
    }
    for o in &mut open {
        for signal in [Signal::TERM, Signal::CONT] {
            if pidfd_send_signal(&o.pidfd, signal) == Err(Errno::SRCH) {
                o.fate = Fate::Terminated;
            }
        }
    }
    wait_all(&mut open, grace, Fate::Terminated);
    for o in open.iter_mut().filter(|o| o.fate == Fate::Running) {
        if pidfd_send_signal(&o.pidfd, Signal::KILL) == Err(Errno::SRCH) {
            o.fate = Fate::Terminated;
        }
    }
    wait_all(&mut open, KILL_WAIT, Fate::Killed);
    for o in &open {
        match o.fate {
            Fate::Terminated => reaped.terminated += 1,
            Fate::Killed => reaped.killed += 1,
            Fate::Running => reaped.failed.push(o.target.identity.pid),
        }
    }
}

/// Poll the pidfds of running processes until all have exited (their fate becomes `fate`) or
/// `timeout` passes.
fn wait_all(open: &mut [Open<'_>], timeout: Duration, fate: Fate) {
    let deadline = Instant::now() + timeout;
    loop {
        let waiting: Vec<usize> = (0..open.len())
            .filter(|i| open[*i].fate == Fate::Running)
            .collect();
        if waiting.is_empty() {
            return;
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        let wait = Timespec {
            tv_sec: remaining.as_secs() as _,
            tv_nsec: remaining.subsec_nanos() as _,
        };
        let mut fds: Vec<PollFd<'_>> = waiting
            .iter()
            .map(|i| PollFd::new(&open[*i].pidfd, PollFlags::IN))
            .collect();
        let _ = poll(&mut fds, Some(&wait));
        let done: Vec<usize> = waiting
            .iter()
            .zip(&fds)
            .filter(|(_, fd)| fd.revents().contains(PollFlags::IN))
            .map(|(i, _)| *i)
            .collect();
        drop(fds);
        for i in done {
            open[i].fate = fate;
        }
        if remaining.is_zero() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command};

    use super::*;

    fn marked(script: &str, marker: &str, ready: &std::path::Path) -> Child {
        let child = Command::new("sh")
            .args([
                "-c",
                &format!(
                    "{script}; touch {}; while :; do sleep 1; done",
                    ready.display()
                ),
            ])
            .env("RECONCILE_OWNER", marker)
            .spawn()
            .unwrap();
        reconcile_testkit::wait_for("the child to be ready", Duration::from_secs(20), || {
            ready.exists()
        });
        child
    }

    #[test]
    fn stops_the_recorded_and_spares_the_changed() {
        let boot = crate::boot_id().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut polite = marked("true", "i/s-1", &dir.path().join("a"));
        let mut stubborn = marked("trap '' TERM", "i/s-1", &dir.path().join("b"));
        let mut other = marked("true", "i/s-2", &dir.path().join("c"));
        let id = |c: &Child| identity(&boot, c.id()).unwrap().unwrap();
        let targets = vec![
            Target {
                identity: id(&polite),
                marker: "i/s-1".into(),
            },
            Target {
                identity: id(&stubborn),
                marker: "i/s-1".into(),
            },
            // Recorded with other start ticks: not the same process, never signalled.
            Target {
                identity: ProcessIdentity {
                    start_ticks: id(&other).start_ticks + 1,
                    ..id(&other)
                },
                marker: "i/s-2".into(),
            },
            // Right identity, wrong marker: not signalled either.
            Target {
                identity: id(&other),
                marker: "i/s-9".into(),
            },
        ];
        let reaped = reap(&boot, &targets, Duration::from_millis(300));
        assert_eq!(
            reaped,
            Reaped {
                terminated: 1,
                killed: 1,
                vanished: 2,
                failed: vec![]
            }
        );
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(polite.wait().unwrap().signal(), Some(15));
        assert_eq!(stubborn.wait().unwrap().signal(), Some(9));
        assert!(
            other.try_wait().unwrap().is_none(),
            "the mismatched process lives"
        );
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
