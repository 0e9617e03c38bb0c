//! The takeover lock, `$RECONCILE_HOME/takeover.lock`: racing launchers queue on it. A wait
//! whose directory vanished fails after a fixed grace instead of spinning, and the lock is only
//! held while the file is still the one at the path.

use std::fs::{self, File, TryLockError};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use reconcile_home::Home;

use crate::Error;

/// How long the lock directory may be missing before a waiter gives up.
const VANISHED_GRACE: Duration = Duration::from_secs(2);

/// Held until dropped; close-on-exec, so no spawned daemon inherits it.
#[derive(Debug)]
pub struct TakeoverLock {
    _file: File,
}

/// Wait up to `timeout` for the takeover lock of `home`.
pub fn lock(home: &Home, timeout: Duration) -> Result<TakeoverLock, Error> {
    let path = home.takeover_lock();
    let started = Instant::now();
    let mut vanished_since: Option<Instant> = None;
    let mut pause = Duration::from_millis(2);
    loop {
        match File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
        {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let since = *vanished_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= VANISHED_GRACE {
                    return Err(Error::LockDirVanished {
                        dir: home.root().to_owned(),
                    });
                }
            }
            Err(source) => return Err(Error::Lock { path, source }),
            Ok(file) => {
                vanished_since = None;
                match file.try_lock() {
                    // Still the file at the path? If it was removed or replaced, retry on the new one.
                    Ok(()) if same_file(&file, &path) => return Ok(TakeoverLock { _file: file }),
                    Ok(()) | Err(TryLockError::WouldBlock) => {}
                    Err(TryLockError::Error(source)) => return Err(Error::Lock { path, source }),
                }
            }
        }
        if started.elapsed() >= timeout {
            return Err(Error::LockTimeout {
                seconds: timeout.as_secs(),
            });
        }
        // Polling with a deadline: another launcher's takeover takes seconds at most.
        std::thread::park_timeout(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

fn same_file(file: &File, path: &std::path::Path) -> bool {
    match (file.metadata(), fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_waits_then_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        let held = lock(&home, Duration::from_secs(5)).unwrap();
        let err = lock(&home, Duration::from_millis(200)).unwrap_err();
        assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
        drop(held);
        lock(&home, Duration::from_secs(5)).unwrap();
    }

    #[test]
    fn a_waiter_whose_directory_vanished_gives_up_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("state"));
        home.ensure().unwrap();
        let held = lock(&home, Duration::from_secs(5)).unwrap();
        let root = home.root().to_owned();
        let waiter = std::thread::spawn(move || lock(&Home::new(root), Duration::from_secs(60)));
        // Remove the directory while the holder still holds its (now unlinked) lock file.
        fs::remove_dir_all(home.root()).unwrap();
        let started = Instant::now();
        let result = waiter.join().unwrap();
        assert!(
            matches!(result, Err(Error::LockDirVanished { .. })),
            "{result:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "it must not wait for the full timeout"
        );
        drop(held);
    }
}
