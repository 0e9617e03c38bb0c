//! The one owner of every path and environment setting: the state directory (`RECONCILE_HOME`)
//! and what lives in it, the port, the tmux socket, the daemon binary.
//!
//! Nothing else in Reconcile builds a path into the state directory or reads these variables.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const HOME_VAR: &str = "RECONCILE_HOME";
pub const PORT_VAR: &str = "RECONCILE_PORT";
pub const TMUX_SOCKET_VAR: &str = "RECONCILE_TMUX_SOCKET";
pub const DAEMON_VAR: &str = "RECONCILE_DAEMON";

pub const DEFAULT_PORT: u16 = 47800;
pub const DEFAULT_TMUX_SOCKET: &str = "reconcile";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot find a state directory: set {HOME_VAR}, XDG_DATA_HOME or HOME")]
    NoHome,
    #[error("{var}={value:?} is not a valid {what}")]
    InvalidVar {
        var: &'static str,
        value: String,
        what: &'static str,
    },
    #[error("cannot create the state directory {path}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
}

/// The state directory and every path inside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Home {
        Home { root: root.into() }
    }

    /// `$RECONCILE_HOME`, else `$XDG_DATA_HOME/reconcile`, else `$HOME/.local/share/reconcile`.
    pub fn from_env() -> Result<Home, Error> {
        Home::from_vars(|name| std::env::var_os(name))
    }

    fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Result<Home, Error> {
        let set = |name: &str| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(root) = set(HOME_VAR) {
            return Ok(Home::new(root));
        }
        if let Some(data) = set("XDG_DATA_HOME") {
            return Ok(Home::new(data.join("reconcile")));
        }
        let home = set("HOME").ok_or(Error::NoHome)?;
        Ok(Home::new(home.join(".local/share/reconcile")))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Create the state directory (mode 0700) and its log and worktree directories.
    pub fn ensure(&self) -> Result<(), Error> {
        for dir in [self.root.clone(), self.logs(), self.worktrees()] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .map_err(|source| Error::CreateDir {
                    path: dir.clone(),
                    source,
                })?;
        }
        // An existing directory keeps its mode from `create`; tighten the root only.
        let _ = fs::set_permissions(&self.root, fs::Permissions::from_mode(0o700));
        Ok(())
    }

    pub fn database(&self) -> PathBuf {
        self.root.join("reconcile.db")
    }

    pub fn run_file(&self) -> PathBuf {
        self.root.join("daemon.json")
    }

    pub fn daemon_lock(&self) -> PathBuf {
        self.root.join("daemon.lock")
    }

    pub fn takeover_lock(&self) -> PathBuf {
        self.root.join("takeover.lock")
    }

    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// The daemon's stdout and stderr when a launcher started it (start-up errors land here).
    pub fn daemon_output(&self) -> PathBuf {
        self.logs().join("reconciled.out")
    }

    /// Where new session worktrees are created, one directory per session.
    pub fn worktrees(&self) -> PathBuf {
        self.root.join("worktrees")
    }

    /// The worktree of warm slot `slot_id`: beside the sessions' worktrees, named apart.
    pub fn slot_worktree(&self, slot_id: &str) -> PathBuf {
        self.worktrees().join(format!("slot-{slot_id}"))
    }
}

/// `$RECONCILE_PORT` or 47800.
pub fn port() -> Result<u16, Error> {
    port_from(std::env::var_os(PORT_VAR))
}

fn port_from(value: Option<OsString>) -> Result<u16, Error> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(DEFAULT_PORT),
        Some(v) => {
            let text = v.to_string_lossy().into_owned();
            match text.parse::<u16>() {
                Ok(p) if p != 0 => Ok(p),
                _ => Err(Error::InvalidVar {
                    var: PORT_VAR,
                    value: text,
                    what: "port (1-65535)",
                }),
            }
        }
    }
}

/// `$RECONCILE_TMUX_SOCKET` or `reconcile`: the name passed to `tmux -L`.
pub fn tmux_socket() -> Result<String, Error> {
    tmux_socket_from(std::env::var_os(TMUX_SOCKET_VAR))
}

fn tmux_socket_from(value: Option<OsString>) -> Result<String, Error> {
    match value.filter(|v| !v.is_empty()) {
        None => Ok(DEFAULT_TMUX_SOCKET.to_owned()),
        Some(v) => {
            let text = v.to_string_lossy().into_owned();
            let ok = text.len() <= 100
                && text
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            if ok {
                Ok(text)
            } else {
                Err(Error::InvalidVar {
                    var: TMUX_SOCKET_VAR,
                    value: text,
                    what: "tmux socket name (letters, digits, '-', '_', '.')",
                })
            }
        }
    }
}

/// `$RECONCILE_DAEMON`, else `reconciled` beside `current_exe`.
pub fn daemon_binary(current_exe: &Path) -> PathBuf {
    match std::env::var_os(DAEMON_VAR).filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => current_exe.with_file_name("reconciled"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn home(vars: &[(&str, &str)]) -> Result<Home, Error> {
        Home::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    #[test]
    fn reconcile_home_redirects_everything() {
        let h = home(&[(HOME_VAR, "/s"), ("XDG_DATA_HOME", "/x"), ("HOME", "/h")]).unwrap();
        for p in [
            h.database(),
            h.run_file(),
            h.daemon_lock(),
            h.takeover_lock(),
            h.logs(),
            h.worktrees(),
        ] {
            assert!(p.starts_with("/s"), "{}", p.display());
        }
        assert_eq!(h.run_file(), Path::new("/s/daemon.json"));
    }

    #[test]
    fn falls_back_to_xdg_then_home() {
        assert_eq!(
            home(&[("XDG_DATA_HOME", "/x"), ("HOME", "/h")])
                .unwrap()
                .root(),
            Path::new("/x/reconcile")
        );
        assert_eq!(
            home(&[("HOME", "/h")]).unwrap().root(),
            Path::new("/h/.local/share/reconcile")
        );
        assert_eq!(
            home(&[(HOME_VAR, ""), ("HOME", "/h")]).unwrap().root(),
            Path::new("/h/.local/share/reconcile")
        );
        assert!(matches!(home(&[]), Err(Error::NoHome)));
    }

    #[test]
    fn ports_and_sockets() {
        assert_eq!(port_from(None).unwrap(), DEFAULT_PORT);
        assert_eq!(port_from(Some("5000".into())).unwrap(), 5000);
        for bad in ["0", "x", "70000"] {
            let e = port_from(Some(bad.into())).unwrap_err().to_string();
            assert!(e.contains(PORT_VAR) && e.contains(bad), "{e}");
        }
        assert_eq!(tmux_socket_from(None).unwrap(), "reconcile");
        assert_eq!(tmux_socket_from(Some("t-1.x_y".into())).unwrap(), "t-1.x_y");
        assert!(tmux_socket_from(Some("a/b".into())).is_err());
    }

    #[test]
    fn ensure_creates_private_directories() {
        let dir = tempfile::tempdir().unwrap();
        let h = Home::new(dir.path().join("state"));
        h.ensure().unwrap();
        h.ensure().unwrap();
        let mode = fs::metadata(h.root()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert!(h.logs().is_dir() && h.worktrees().is_dir());
    }
}
