//! Run a child process to completion within a deadline, capturing its output, and count it.

use std::io::{self, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::{Errno, ioctl_fionbio};
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use crate::Error;

/// How many child processes were started. Shared by the adapters of one daemon; a pass reads it
/// before and after to report its own count.
#[derive(Clone, Debug, Default)]
pub struct ChildCount(Arc<AtomicU64>);

impl ChildCount {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Run `command` with stdin from /dev/null, capturing stdout and stderr. A child still running
/// at the deadline is killed (it is our own unreaped child, so its pid cannot have been reused).
///
/// Exit is awaited through a pidfd; output left in a pipe held open by a grandchild that
/// outlives the child does not keep this waiting.
pub fn run(
    command: &mut Command,
    timeout: Duration,
    children: &ChildCount,
) -> Result<Output, Error> {
    let program = command.get_program().to_string_lossy().into_owned();
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|source| Error::Spawn {
        program: program.clone(),
        source,
    })?;
    children.add();
    let result = collect(&mut child, timeout, &program);
    if result.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    result
}

fn collect(child: &mut Child, timeout: Duration, program: &str) -> Result<Output, Error> {
    let wait_error = |source: io::Error| Error::Wait {
        program: program.to_owned(),
        source,
    };
    let pidfd = pidfd_open(Pid::from_child(child), PidfdFlags::empty())
        .map_err(|e| wait_error(e.into()))?;
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(wait_error(io::Error::other("child pipes missing")));
    };
    ioctl_fionbio(&stdout, true).map_err(|e| wait_error(e.into()))?;
    ioctl_fionbio(&stderr, true).map_err(|e| wait_error(e.into()))?;

    let deadline = Instant::now() + timeout;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (mut out_open, mut err_open) = (true, true);
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(Error::Timeout {
                program: program.to_owned(),
                after: timeout,
            });
        }
        let wait = Timespec {
            tv_sec: remaining.as_secs() as _,
            tv_nsec: remaining.subsec_nanos() as _,
        };
        let exited = {
            let mut fds = vec![PollFd::new(&pidfd, PollFlags::IN)];
            if out_open {
                fds.push(PollFd::new(&stdout, PollFlags::IN));
            }
            if err_open {
                fds.push(PollFd::new(&stderr, PollFlags::IN));
            }
            match poll(&mut fds, Some(&wait)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => return Err(wait_error(e.into())),
            }
            fds[0].revents().contains(PollFlags::IN)
        };
        if out_open {
            out_open = drain(&mut stdout, &mut out).map_err(wait_error)?;
        }
        if err_open {
            err_open = drain(&mut stderr, &mut err).map_err(wait_error)?;
        }
        if exited {
            break;
        }
    }
    let status = child.wait().map_err(wait_error)?;
    Ok(Output {
        status,
        stdout: out,
        stderr: err,
    })
}

/// Read what is available; `Ok(false)` at end of file.
fn drain(reader: &mut impl Read, into: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => into.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn captures_output_and_status() {
        let count = ChildCount::default();
        let out = run(
            &mut sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(30),
            &count,
        )
        .unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(count.get(), 1);
    }

    #[test]
    fn large_output_does_not_deadlock() {
        let out = run(
            &mut sh("head -c 1000000 /dev/zero"),
            Duration::from_secs(30),
            &ChildCount::default(),
        )
        .unwrap();
        assert_eq!(out.stdout.len(), 1_000_000);
    }

    #[test]
    fn a_child_past_its_deadline_is_killed() {
        let count = ChildCount::default();
        let err = run(&mut sh("exec sleep 30"), Duration::from_millis(200), &count).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        assert!(err.to_string().contains("sh did not finish"), "{err}");
    }

    #[test]
    fn a_grandchild_holding_the_pipe_does_not_block() {
        // The grandchild keeps stdout open for 30 s; the child exits at once.
        let out = run(
            &mut sh("sleep 30 & echo done"),
            Duration::from_secs(20),
            &ChildCount::default(),
        )
        .unwrap();
        assert_eq!(out.stdout, b"done\n");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error() {
        let count = ChildCount::default();
        let err = run(
            &mut Command::new("/nonexistent/prog"),
            Duration::from_secs(1),
            &count,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }));
        assert_eq!(count.get(), 0);
    }
}
