//! Process identity from `/proc`: (boot id, pid, start ticks), and the ownership marker.

use std::fs;
use std::io;
use std::path::PathBuf;

use reconcile_core::{Marker, OwnerMarker, ProcessIdentity, ProcessObservation};

use crate::Error;

const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";

/// This boot's id. Identities from another boot never match one from this boot.
pub fn boot_id() -> Result<String, Error> {
    let text = fs::read_to_string(BOOT_ID).map_err(|source| Error::Read {
        path: BOOT_ID.into(),
        source,
    })?;
    let id = text.trim();
    if id.is_empty() {
        return Err(Error::Parse {
            path: BOOT_ID.into(),
        });
    }
    Ok(id.to_owned())
}

/// Every pid in `/proc` now, read one directory entry at a time (one descriptor open).
pub(crate) fn pids() -> Result<impl Iterator<Item = u32>, Error> {
    let entries = fs::read_dir("/proc").map_err(|source| Error::Read {
        path: "/proc".into(),
        source,
    })?;
    Ok(entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok())))
}

/// The identity of `pid` now, or `None` when no such process exists.
pub fn identity(boot_id: &str, pid: u32) -> Result<Option<ProcessIdentity>, Error> {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // ESRCH: the process exited between open and read.
        Err(e) if e.raw_os_error() == Some(3) => return Ok(None),
        Err(source) => return Err(Error::Read { path, source }),
    };
    // A zombie has exited: it runs nothing, holds nothing, and only waits to be reaped.
    if matches!(state(&text), Some('Z' | 'X')) {
        return Ok(None);
    }
    let start_ticks = start_ticks(&text).ok_or(Error::Parse { path })?;
    Ok(Some(ProcessIdentity {
        boot_id: boot_id.to_owned(),
        pid,
        start_ticks,
    }))
}

/// Field 3 of `/proc/<pid>/stat`: R, S, D, T, Z, ...
fn state(stat: &str) -> Option<char> {
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Field 22 of `/proc/<pid>/stat`. The command name (field 2) may hold spaces and parentheses,
/// so fields are counted after its last `)`.
fn start_ticks(stat: &str) -> Option<u64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    // After the name: field 3 (state) is the first; field 22 is the 20th.
    after_comm.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// What `/proc` shows for `pid`, for comparison with a recorded identity.
pub fn observe(boot_id: &str, pid: u32) -> ProcessObservation {
    match identity(boot_id, pid) {
        Ok(Some(identity)) => ProcessObservation::Present(identity),
        Ok(None) => ProcessObservation::Absent,
        Err(_) => ProcessObservation::Unreadable,
    }
}

/// The `RECONCILE_OWNER` value in `pid`'s environment.
pub fn owner_marker(pid: u32) -> Marker {
    let path = format!("/proc/{pid}/environ");
    let Ok(bytes) = fs::read(&path) else {
        return Marker::Unreadable;
    };
    let prefix = format!("{}=", OwnerMarker::VAR);
    bytes
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .map_or(Marker::Absent, |v| {
            Marker::Present(String::from_utf8_lossy(v).into_owned())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_start_ticks_after_a_tricky_name() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(start_ticks(stat), Some(987654));
        assert_eq!(start_ticks("42 (x) S 1"), None);
        assert_eq!(start_ticks("garbage"), None);
    }

    #[test]
    fn own_identity_is_stable_and_marker_absent() {
        let boot = boot_id().unwrap();
        let me = std::process::id();
        let a = identity(&boot, me).unwrap().unwrap();
        let b = identity(&boot, me).unwrap().unwrap();
        assert_eq!(a, b);
        assert!(a.start_ticks > 0);
        assert_eq!(observe(&boot, me), ProcessObservation::Present(a));
        // No pid this large exists (pid_max is at most 2^22).
        assert_eq!(identity(&boot, 99_999_999).unwrap(), None);
        assert_eq!(observe(&boot, 99_999_999), ProcessObservation::Absent);
    }

    #[test]
    fn a_zombie_is_not_alive() {
        let boot = boot_id().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        // Not reaped yet: once it has exited it is a zombie, whose /proc entry still exists.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while identity(&boot, child.id()).unwrap().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "the zombie still counts as alive"
            );
            std::thread::yield_now();
        }
        assert!(
            std::fs::metadata(format!("/proc/{}", child.id())).is_ok(),
            "still a zombie"
        );
        assert_eq!(observe(&boot, child.id()), ProcessObservation::Absent);
        child.wait().unwrap();
    }

    #[test]
    fn reads_the_marker_of_a_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(OwnerMarker::VAR, "inst/s-1")
            .spawn()
            .unwrap();
        // A vfork-style spawn returns before exec has laid out the new environment; until
        // then the environ is empty. Poll for it with a deadline.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut marker = owner_marker(child.id());
        while marker == Marker::Absent && std::time::Instant::now() < deadline {
            std::thread::yield_now();
            marker = owner_marker(child.id());
        }
        let unmarked = owner_marker(std::process::id());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(marker, Marker::Present("inst/s-1".into()));
        if std::env::var_os(OwnerMarker::VAR).is_none() {
            assert_eq!(unmarked, Marker::Absent);
        }
        assert_eq!(owner_marker(99_999_999), Marker::Unreadable);
    }
}

/// When a process with `start_ticks` (field 22 of its stat) started, in Unix milliseconds: boot
/// time from `/proc/stat` plus the ticks.
pub fn started_at_ms(start_ticks: u64) -> Result<i64, Error> {
    let path = std::path::PathBuf::from("/proc/stat");
    let stat = std::fs::read_to_string(&path).map_err(|source| Error::Read {
        path: path.clone(),
        source,
    })?;
    let btime: i64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(Error::Parse { path })?;
    let hz = rustix::param::clock_ticks_per_second().max(1);
    Ok(btime * 1000 + (start_ticks * 1000 / hz) as i64)
}

#[cfg(test)]
mod started {
    #[test]
    fn this_process_started_within_the_last_minutes() {
        let boot = super::boot_id().unwrap();
        let me = super::identity(&boot, std::process::id()).unwrap().unwrap();
        let started = super::started_at_ms(me.start_ticks).unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        assert!(started <= now + 1000, "{started} vs {now}");
        assert!(now - started < 3_600_000, "{started} vs {now}");
    }
}
