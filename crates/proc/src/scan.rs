//! One pass over `/proc` for processes that carry an ownership marker. No child process is
//! started; one file is open at a time; unreadable processes are skipped.

use reconcile_core::{Marker, ProcessIdentity};

use crate::identity::pids;
use crate::{Error, identity, owner_marker};

/// A process with a `RECONCILE_OWNER` marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marked {
    pub identity: ProcessIdentity,
    /// The marker's raw value.
    pub marker: String,
}

/// What one scan saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// Processes looked at (readable or not).
    pub scanned: u64,
    pub marked: Vec<Marked>,
}

/// Every process with a marker, other than this one.
pub fn scan_markers(boot_id: &str) -> Result<Scan, Error> {
    let me = std::process::id();
    let mut scan = Scan::default();
    for pid in pids()? {
        scan.scanned += 1;
        if pid == me {
            continue;
        }
        let Marker::Present(marker) = owner_marker(pid) else {
            continue;
        };
        // Gone, a zombie, or unreadable between the two reads: skipped, never guessed.
        if let Ok(Some(identity)) = identity(boot_id, pid) {
            scan.marked.push(Marked { identity, marker });
        }
    }
    Ok(scan)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn finds_marked_children_and_nothing_unmarked() {
        let boot = crate::boot_id().unwrap();
        let mut marked = Command::new("sleep")
            .arg("60")
            .env("RECONCILE_OWNER", "scan-test/s-1")
            .spawn()
            .unwrap();
        let mut plain = Command::new("sleep")
            .arg("60")
            .env_remove("RECONCILE_OWNER")
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let found = loop {
            let scan = scan_markers(&boot).unwrap();
            if let Some(m) = scan.marked.iter().find(|m| m.identity.pid == marked.id()) {
                assert!(scan.scanned > 2);
                assert!(scan.marked.iter().all(|m| m.identity.pid != plain.id()));
                break m.clone();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the marked child was never seen"
            );
            std::thread::yield_now();
        };
        assert_eq!(found.marker, "scan-test/s-1");
        for child in [&mut marked, &mut plain] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}
