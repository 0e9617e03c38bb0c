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

/// A session command that leaves behind (a) a background child, (b) a setsid grandchild, (c) a
/// double-forked process reparented to init, (d) a process that ignores SIGTERM, (e) a process
/// stopped with SIGSTOP (in its own session, so the kernel's SIGCONT to newly orphaned process
/// groups does not wake it). Each writes "<kind> <pid>" to `dir/pids`; then `dir/ready` appears
/// and the command itself sleeps.
pub fn leaky_script(dir: &Path) -> String {
    let pids = dir.join("pids").display().to_string();
    let ready = dir.join("ready").display().to_string();
    format!(
        r#"nohup sleep 600 >/dev/null 2>&1 & echo "a $!" >> {pids}
setsid sh -c 'echo "b $$" >> {pids}; exec sleep 600' >/dev/null 2>&1 &
sh -c 'nohup sleep 600 >/dev/null 2>&1 & echo "c $!" >> {pids}'
nohup sh -c 'trap "" TERM HUP; echo "d $$" >> {pids}; exec sleep 600' >/dev/null 2>&1 &
setsid sh -c 'echo "e $$" >> {pids}; kill -STOP $$; exec sleep 600' >/dev/null 2>&1 &
while [ "$(wc -l < {pids})" -lt 5 ]; do sleep 0.05; done
touch {ready}
exec sleep 600"#
    )
}

/// After `leaky_script` is ready: kind and pid of each process it left.
pub fn leaky_pids(dir: &Path) -> Vec<(String, u32)> {
    wait_for(
        "the leaky session's processes",
        Duration::from_secs(60),
        || dir.join("ready").exists(),
    );
    fs::read_to_string(dir.join("pids"))
        .unwrap()
        .lines()
        .map(|line| {
            let (kind, pid) = line.split_once(' ').unwrap();
            (kind.to_owned(), pid.parse().unwrap())
        })
        .collect()
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

    /// Stop the server and wait until tmux says unambiguously that none runs. A client that
    /// connects while a server is exiting gets neither a listing nor "no server".
    pub fn kill_server(&self) {
        self.tmux(&["kill-server"]);
        self.wait_settled(|_| false);
    }

    /// Kill one session and wait until the server lists the rest (or has exited).
    pub fn kill_session(&self, name: &str) {
        let out = self.tmux(&["kill-session", "-t", &format!("={name}")]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_settled(|names| !names.iter().any(|n| n == name));
    }

    /// Poll until tmux answers cleanly: a listing that satisfies `done`, or no server at all.
    fn wait_settled(&self, done: impl Fn(&[String]) -> bool) {
        wait_for("tmux to settle", Duration::from_secs(20), || {
            let out = self.tmux(&["list-sessions", "-F", "#{session_name}"]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.success() {
                let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .map(str::to_owned)
                    .collect();
                // A server with no sessions left is exiting, unless it was told to stay.
                (!names.is_empty() || self.stays_when_empty()) && done(&names)
            } else {
                stderr.starts_with("no server running")
                    || stderr.contains("(No such file or directory)")
            }
        });
    }

    /// Whether the server keeps running without sessions (`exit-empty off`).
    fn stays_when_empty(&self) -> bool {
        let out = self.tmux(&["show-options", "-s", "-v", "exit-empty"]);
        out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "off"
    }

    /// The pid of this socket's tmux server, if one runs.
    pub fn server_pid(&self) -> Option<u32> {
        let out = self.tmux(&["display-message", "-p", "#{pid}"]);
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    }

    /// Stop this socket's tmux server with SIGSTOP (it accepts connections and never answers)
    /// until the guard is dropped, even when the test fails.
    pub fn freeze(&self) -> Frozen {
        let pid = self.server_pid().expect("a tmux server to freeze");
        let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
        Frozen { pid }
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

/// A tmux server stopped by [`TmuxSocket::freeze`]; continued on drop.
#[derive(Debug)]
pub struct Frozen {
    pid: rustix::process::Pid,
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = rustix::process::kill_process(self.pid, rustix::process::Signal::CONT);
    }
}

impl Drop for TmuxSocket {
    fn drop(&mut self) {
        // Our own server on our own private socket: safe to stop.
        let _ = self.tmux(&["kill-server"]);
    }
}
