//! The run-file `$RECONCILE_HOME/daemon.json`: written atomically with mode 0600 by the daemon,
//! read defensively by everyone else.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A run-file larger than this is not ours.
const MAX_LEN: u64 = 64 * 1024;

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFile {
    pub pid: u32,
    pub port: u16,
    pub boot_id: String,
    pub start_ticks: u64,
    pub instance_id: String,
    pub version: String,
    /// The bearer token for `/v1`. A secret: never logged, never shown.
    pub token: String,
}

impl std::fmt::Debug for RunFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunFile")
            .field("pid", &self.pid)
            .field("port", &self.port)
            .field("boot_id", &self.boot_id)
            .field("start_ticks", &self.start_ticks)
            .field("instance_id", &self.instance_id)
            .field("version", &self.version)
            .field("token", &"[redacted]")
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    #[error("no run-file at {path}")]
    Absent { path: PathBuf },
    #[error("the run-file {path} is a symbolic link; it is ignored")]
    Symlink { path: PathBuf },
    #[error("the run-file {path} is not a regular file; it is ignored")]
    NotAFile { path: PathBuf },
    #[error("the run-file {path} is readable or writable by others (mode {mode:o}); it is ignored")]
    LoosePermissions { path: PathBuf, mode: u32 },
    #[error("the run-file {path} is owned by another user; it is ignored")]
    ForeignOwner { path: PathBuf },
    #[error("the run-file {path} is {len} bytes, too large to be ours; it is ignored")]
    TooLarge { path: PathBuf, len: u64 },
    #[error("the run-file {path} is not valid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("cannot read the run-file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write the run-file {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
}

/// Write the run-file atomically: a temp file in the same directory (mode 0600), fsync, rename,
/// fsync of the directory.
pub fn write_run_file(path: &Path, run: &RunFile) -> Result<(), RunFileError> {
    let write_error = |source| RunFileError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::Builder::new()
        .prefix(".daemon.json.")
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(write_error)?;
    let json = serde_json::to_vec_pretty(run).map_err(|e| write_error(io::Error::other(e)))?;
    temp.write_all(&json).map_err(write_error)?;
    temp.as_file().sync_all().map_err(write_error)?;
    temp.persist(path).map_err(|e| write_error(e.error))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_error)?;
    Ok(())
}

/// Read and validate the run-file. Anything odd (a symlink, loose permissions, another owner,
/// an oversized or malformed file) is an error, and the caller treats the file as absent: it is
/// never followed to signal anyone.
pub fn read_run_file(path: &Path) -> Result<RunFile, RunFileError> {
    let p = || path.to_owned();
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(RunFileError::Absent { path: p() });
        }
        Err(source) => return Err(RunFileError::Read { path: p(), source }),
    };
    if meta.file_type().is_symlink() {
        return Err(RunFileError::Symlink { path: p() });
    }
    if !meta.is_file() {
        return Err(RunFileError::NotAFile { path: p() });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(RunFileError::LoosePermissions {
            path: p(),
            mode: meta.mode() & 0o777,
        });
    }
    if meta.uid() != rustix_uid() {
        return Err(RunFileError::ForeignOwner { path: p() });
    }
    if meta.len() > MAX_LEN {
        return Err(RunFileError::TooLarge {
            path: p(),
            len: meta.len(),
        });
    }
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(path)
        .map_err(|source| RunFileError::Read { path: p(), source })?;
    let mut text = Vec::new();
    file.take(MAX_LEN + 1)
        .read_to_end(&mut text)
        .map_err(|source| RunFileError::Read { path: p(), source })?;
    if text.len() as u64 > MAX_LEN {
        return Err(RunFileError::TooLarge {
            path: p(),
            len: text.len() as u64,
        });
    }
    let run: RunFile = serde_json::from_slice(&text).map_err(|e| RunFileError::Invalid {
        path: p(),
        reason: e.to_string(),
    })?;
    if run.pid == 0 || run.port == 0 || run.token.is_empty() || run.boot_id.is_empty() {
        return Err(RunFileError::Invalid {
            path: p(),
            reason: "pid, port, boot_id and token must be set".to_owned(),
        });
    }
    Ok(run)
}

/// Remove the run-file if it still names `pid` (a newer daemon may have replaced it).
pub fn remove_run_file_if_ours(path: &Path, pid: u32) {
    if read_run_file(path).is_ok_and(|run| run.pid == pid) {
        let _ = fs::remove_file(path);
    }
}

fn rustix_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// O_NOFOLLOW: a symlink swapped in after the check is not followed.
fn libc_o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn sample() -> RunFile {
        RunFile {
            pid: 42,
            port: 47800,
            boot_id: "b".into(),
            start_ticks: 7,
            instance_id: "i".into(),
            version: "0.1.0".into(),
            token: "secret-token".into(),
        }
    }

    #[test]
    fn round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.json");
        write_run_file(&path, &sample()).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert_eq!(read_run_file(&path).unwrap(), sample());
        assert!(!format!("{:?}", sample()).contains("secret-token"));
        remove_run_file_if_ours(&path, 41);
        assert!(path.exists());
        remove_run_file_if_ours(&path, 42);
        assert!(!path.exists());
    }

    #[test]
    fn odd_files_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("daemon.json");
        let write = |bytes: &[u8], mode: u32| {
            let _ = fs::remove_file(&path);
            fs::write(&path, bytes).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        };
        assert!(matches!(
            read_run_file(&path),
            Err(RunFileError::Absent { .. })
        ));
        write(b"", 0o600);
        assert!(matches!(
            read_run_file(&path),
            Err(RunFileError::Invalid { .. })
        ));
        write(b"{\"pid\": 1", 0o600);
        assert!(matches!(
            read_run_file(&path),
            Err(RunFileError::Invalid { .. })
        ));
        write(b"not json at all", 0o600);
        assert!(matches!(
            read_run_file(&path),
            Err(RunFileError::Invalid { .. })
        ));
        write(&vec![b' '; 100_000], 0o600);
        assert!(matches!(
            read_run_file(&path),
            Err(RunFileError::TooLarge { .. })
        ));
        write(&serde_json::to_vec(&sample()).unwrap(), 0o644);
        assert!(matches!(
            read_run_file(&path),
            Err(RunFileError::LoosePermissions { .. })
        ));

        let target = dir.path().join("target.json");
        fs::write(&target, serde_json::to_vec(&sample()).unwrap()).unwrap();
        fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();
        fs::remove_file(&path).unwrap();
        symlink(&target, &path).unwrap();
        assert!(matches!(
            read_run_file(&path),
            Err(RunFileError::Symlink { .. })
        ));
        assert!(target.exists(), "the symlink's target is untouched");
    }
}
