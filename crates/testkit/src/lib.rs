//! Fixtures shared by the tests of every crate: real git repositories in temp dirs, a private
//! tmux socket that is cleaned up on drop, and polling with a deadline instead of sleeping.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Poll `done` until it returns true; panic naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    while !done() {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        // Back off between polls; this is polling with a deadline, not waiting a fixed time.
        std::thread::park_timeout(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Run a command, panic with its output when it fails, return its stdout.
pub fn sh(dir: &Path, script: &str) -> String {
    let out = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "`{script}` failed in {}:\n{}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A git repository with one commit (`README`, `src/lib.txt`) and a `.gitignore` for `*.log`.
pub fn repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    fs::create_dir_all(repo.join("src")).unwrap();
    fs::write(repo.join("README"), "hello\n").unwrap();
    fs::write(repo.join("src/lib.txt"), "one\n").unwrap();
    fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    sh(
        &repo,
        "git init -q -b main . && git config user.name T && git config user.email t@example.com \
         && git add -A && git commit -q -m initial",
    );
    repo
}

/// A unique tmux socket name for this process and call, killed (server and all) on drop.
#[derive(Debug)]
pub struct TmuxSocket {
    pub name: String,
}

impl TmuxSocket {
    pub fn new(tag: &str) -> TmuxSocket {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        TmuxSocket {
            name: format!("rc-test-{tag}-{}-{n}", std::process::id()),
        }
    }

    /// `tmux -L <name> <args>`; output regardless of status.
    pub fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.name])
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap()
    }

    /// Names of the sessions on this socket (empty when no server runs).
    pub fn sessions(&self) -> Vec<String> {
        let out = self.tmux(&["list-sessions", "-F", "#{session_name}"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for TmuxSocket {
    fn drop(&mut self) {
        // Our own server on our own private socket: safe to stop.
        let _ = self.tmux(&["kill-server"]);
    }
}
