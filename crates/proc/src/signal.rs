//! Stopping a process proven to be the one recorded: through a pidfd, after re-reading its
//! identity, never by pid alone.

use std::io;
use std::time::{Duration, Instant};

use reconcile_core::ProcessIdentity;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::process::{
    Pid, PidfdFlags, Signal, getpgid, kill_process_group, pidfd_open, pidfd_send_signal,
};

use crate::{Error, identity};

/// What stopping found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// It was ours, it was signalled, and it exited.
    Exited,
    /// It was already gone, or its pid now belongs to another process (which was not touched).
    NotFound,
}

/// Stop the process `expected` names: SIGTERM and SIGCONT, up to `grace` for it to exit, then
/// SIGKILL if it is still running. Every signal goes through a pidfd opened before the identity
/// is re-checked, so a pid reused in between cannot be hit.
pub fn stop_process(
    boot_id: &str,
    expected: &ProcessIdentity,
    grace: Duration,
) -> Result<Stopped, Error> {
    stop(boot_id, expected, grace, Reach::Process)
}

/// Like [`stop_process`], and when `expected` leads its process group, every signal also goes to
/// the group (the daemon's children die with it). The leader's identity is checked through its
/// pidfd right before the group is signalled.
pub fn stop_process_group(
    boot_id: &str,
    expected: &ProcessIdentity,
    grace: Duration,
) -> Result<Stopped, Error> {
    stop(boot_id, expected, grace, Reach::Group)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    Process,
    Group,
}

fn stop(
    boot_id: &str,
    expected: &ProcessIdentity,
    grace: Duration,
    reach: Reach,
) -> Result<Stopped, Error> {
    if expected.boot_id != boot_id || expected.pid == 0 {
        return Ok(Stopped::NotFound);
    }
    let Some(pid) = Pid::from_raw(expected.pid as i32) else {
        return Ok(Stopped::NotFound);
    };
    let pidfd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(Errno::SRCH) => return Ok(Stopped::NotFound),
        Err(e) => return Err(signal_error(expected, e)),
    };
    // The pidfd pins this process; if the identity matches now, the fd refers to it.
    match identity(boot_id, expected.pid)? {
        Some(now) if now == *expected => {}
        _ => return Ok(Stopped::NotFound),
    }
    let group = reach == Reach::Group && getpgid(Some(pid)).is_ok_and(|g| g == pid);
    let send = |signal: Signal| -> Result<bool, Error> {
        if group {
            // The group of a leader we just proved is ours; failures (already empty) are fine.
            let _ = kill_process_group(pid, signal);
        }
        match pidfd_send_signal(&pidfd, signal) {
            Ok(()) => Ok(true),
            Err(Errno::SRCH) => Ok(false),
            Err(e) => Err(signal_error(expected, e)),
        }
    };
    // SIGTERM first, then SIGCONT so a stopped process can act on it.
    for signal in [Signal::TERM, Signal::CONT] {
        if !send(signal)? {
            return Ok(Stopped::Exited);
        }
    }
    if exited_within(&pidfd, grace).map_err(|e| signal_error(expected, e))? {
        return Ok(Stopped::Exited);
    }
    send(Signal::KILL)?;
    if exited_within(&pidfd, Duration::from_secs(10)).map_err(|e| signal_error(expected, e))? {
        Ok(Stopped::Exited)
    } else {
        Err(Error::Survived { pid: expected.pid })
    }
}

/// Wait on the pidfd until the process exits or `timeout` passes.
pub(crate) fn exited_within(pidfd: &OwnedFd, timeout: Duration) -> Result<bool, Errno> {
    let deadline = Instant::now() + timeout;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let wait = Timespec {
            tv_sec: remaining.as_secs() as _,
            tv_nsec: remaining.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        match poll(&mut fds, Some(&wait)) {
            Ok(_) if fds[0].revents().contains(PollFlags::IN) => return Ok(true),
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
        if remaining.is_zero() {
            return Ok(false);
        }
    }
}

fn signal_error(expected: &ProcessIdentity, errno: Errno) -> Error {
    Error::Signal {
        pid: expected.pid,
        source: io::Error::from(errno),
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn spawn(script: &str) -> std::process::Child {
        Command::new("sh").args(["-c", script]).spawn().unwrap()
    }

    #[test]
    fn stops_a_process_that_ignores_sigterm_and_leaves_a_mismatch_alone() {
        let boot = crate::boot_id().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let mut stubborn = spawn(&format!(
            "trap '' TERM; touch {}; while :; do sleep 1; done",
            ready.display()
        ));
        reconcile_testkit::wait_for("the trap", std::time::Duration::from_secs(20), || {
            ready.exists()
        });
        let mut other = spawn("exec sleep 600");
        let stubborn_id = identity(&boot, stubborn.id()).unwrap().unwrap();
        let other_id = identity(&boot, other.id()).unwrap().unwrap();

        // Same pid, other start ticks: not ours any more. Nothing is signalled.
        let stale = ProcessIdentity {
            start_ticks: other_id.start_ticks + 1,
            ..other_id.clone()
        };
        assert_eq!(
            stop_process(&boot, &stale, Duration::from_millis(100)).unwrap(),
            Stopped::NotFound
        );
        let stale_boot = ProcessIdentity {
            boot_id: "another-boot".into(),
            ..other_id.clone()
        };
        assert_eq!(
            stop_process(&boot, &stale_boot, Duration::from_millis(100)).unwrap(),
            Stopped::NotFound
        );
        assert!(
            other.try_wait().unwrap().is_none(),
            "the mismatched process must live"
        );

        let stopped = stop_process(&boot, &stubborn_id, Duration::from_millis(300)).unwrap();
        assert_eq!(stopped, Stopped::Exited);
        let status = stubborn.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "SIGTERM was ignored, so SIGKILL ended it"
        );

        other.kill().unwrap();
        other.wait().unwrap();
        assert_eq!(
            stop_process(&boot, &other_id, Duration::from_millis(100)).unwrap(),
            Stopped::NotFound
        );
    }
}
