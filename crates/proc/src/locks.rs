//! Who holds a `flock` lock, from `/proc/locks`: without taking the lock, so looking never makes
//! a starting daemon fail to get it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::Error;

/// The pid holding a `flock` write lock on `path`, or `None` when nobody does (or the file does
/// not exist).
pub fn flock_holder(path: &Path) -> Result<Option<u32>, Error> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let locks = PathBuf::from("/proc/locks");
    let text = fs::read_to_string(&locks).map_err(|source| Error::Read {
        path: locks.clone(),
        source,
    })?;
    let want = format!(
        "{:02x}:{:02x}:{}",
        rustix::fs::major(meta.dev()),
        rustix::fs::minor(meta.dev()),
        meta.ino()
    );
    Ok(holder_in(&text, &want))
}

/// The holder of a granted FLOCK on `device_inode` in a `/proc/locks` text. Waiters (lines
/// with `->`) hold nothing.
fn holder_in(text: &str, device_inode: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, "FLOCK", _, _, pid, file, ..] if *file == device_inode => pid.parse().ok(),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_granted_flocks_only() {
        let text = "1: POSIX  ADVISORY  READ 11 fe:00:7 128 128\n\
                    2: FLOCK  ADVISORY  WRITE 12 fe:00:9 0 EOF\n\
                    2: -> FLOCK  ADVISORY  WRITE 13 fe:00:9 0 EOF\n";
        assert_eq!(holder_in(text, "fe:00:9"), Some(12));
        assert_eq!(holder_in(text, "fe:00:7"), None, "a POSIX lock");
        assert_eq!(holder_in(text, "fe:00:8"), None);
    }

    #[test]
    fn finds_this_process_holding_a_real_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        assert_eq!(flock_holder(&path).unwrap(), None, "no file");
        let file = fs::File::create(&path).unwrap();
        assert_eq!(flock_holder(&path).unwrap(), None, "not locked");
        file.lock().unwrap();
        assert_eq!(flock_holder(&path).unwrap(), Some(std::process::id()));
        file.unlock().unwrap();
        assert_eq!(flock_holder(&path).unwrap(), None);
    }
}
