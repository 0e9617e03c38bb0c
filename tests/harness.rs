//! The end-to-end harness: the real `reconciled` and `reconcile` binaries, each test with its own
//! state directory, port and tmux socket, all cleaned up on drop even when the test fails.
//!
//! The binaries are the ones cargo built next to this test (`scripts/test` builds them first).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use reconcile_api::{Client, RunFile, read_run_file};

#[path = "chaos.rs"]
pub mod chaos;
use reconcile_testkit::{TmuxSocket, wait_for};

/// Generous: CI runs on two busy cores.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A binary of the workspace, built next to the running test.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: build the binaries first (`cargo build --workspace --bins`; scripts/test does)",
        path.display()
    );
    path
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One state directory with its port and tmux socket, and the daemon serving it (if started).
#[derive(Debug)]
pub struct Env {
    pub socket: TmuxSocket,
    pub port: u16,
    pub home: PathBuf,
    daemon: Option<Child>,
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new(tag: &str) -> Env {
        let dir = tempfile::tempdir().unwrap();
        Env {
            socket: TmuxSocket::new(tag),
            port: free_port(),
            home: dir.path().join("home"),
            daemon: None,
            dir,
        }
    }

    /// A command with this environment's variables.
    pub fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env("RECONCILE_HOME", &self.home)
            .env("RECONCILE_PORT", self.port.to_string())
            .env("RECONCILE_TMUX_SOCKET", &self.socket.name)
            .env_remove("RECONCILE_OWNER")
            .env_remove("TMUX");
        c
    }

    /// Start `reconciled` without waiting for it.
    pub fn spawn_daemon(&self) -> Child {
        self.command(&bin("reconciled"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Start `reconciled` with `RECONCILE_FAILPOINT` naming the step at which it will SIGKILL
    /// itself (the test binaries are built with failpoints).
    pub fn spawn_daemon_at(&self, failpoint: &str) -> Child {
        self.command(&bin("reconciled"))
            .env("RECONCILE_FAILPOINT", failpoint)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// Start the daemon and wait until `/readyz` answers 200.
    pub fn start(&mut self) -> &mut Env {
        assert!(self.daemon.is_none(), "a daemon of this test already runs");
        self.daemon = Some(self.spawn_daemon());
        self.wait_ready();
        self
    }

    /// Stop tracking the daemon this test started (a takeover replaced it); reap it if it exited.
    pub fn forget_daemon(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.try_wait();
            std::mem::forget(child);
        }
    }

    /// Take charge of a daemon started with `spawn_daemon` (killed on drop).
    pub fn adopt(&mut self, child: Child) {
        assert!(self.daemon.is_none(), "a daemon of this test already runs");
        self.daemon = Some(child);
    }

    pub fn wait_ready(&mut self) {
        let port = self.port;
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}/readyz");
        wait_for("the daemon to be ready", DEADLINE, || {
            if let Some(child) = self.daemon.as_mut()
                && let Some(status) = child.try_wait().unwrap()
            {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("reconciled exited with {status}: {err}");
            }
            http.get(&url).send().is_ok_and(|r| r.status() == 200)
        });
    }

    pub fn pid(&self) -> u32 {
        self.daemon.as_ref().expect("no daemon").id()
    }

    /// SIGKILL the daemon (our own child) and reap it.
    pub fn kill9(&mut self) {
        let mut child = self.daemon.take().expect("no daemon");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// SIGTERM the daemon (our own child, not yet reaped) and wait for it to exit.
    pub fn sigterm(&mut self) -> std::process::ExitStatus {
        let mut child = self.daemon.take().expect("no daemon");
        let pid = rustix::process::Pid::from_child(&child);
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        child.wait().unwrap()
    }

    /// Wait for a daemon that was asked to stop over the API.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        self.daemon.take().expect("no daemon").wait().unwrap()
    }

    pub fn run_file(&self) -> RunFile {
        read_run_file(&self.home.join("daemon.json")).unwrap()
    }

    pub fn client(&self) -> Client {
        let run = self.run_file();
        Client::new(run.port, run.token)
    }

    pub fn token(&self) -> String {
        self.run_file().token
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Run the `reconcile` CLI.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.command(&bin("reconcile"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// Run the CLI with `input` on stdin.
    pub fn cli_with_stdin(&self, args: &[&str], input: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .command(&bin("reconcile"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    }

    /// A git repository with one commit (made on first use).
    pub fn repo(&self) -> PathBuf {
        let path = self.dir.path().join("repo");
        if path.exists() {
            return path;
        }
        reconcile_testkit::repo(self.dir.path())
    }

    /// Start a session running `sh -c script` through the CLI; its id.
    pub fn session(&self, script: &str) -> String {
        let repo = self.repo().display().to_string();
        ok(self.cli(&["session", "new", "--repo", &repo, "--", "sh", "-c", script]))
            .trim()
            .to_owned()
    }

    /// Start `n` sessions running `sleep 3600` through the API (no CLI process each).
    pub fn sleeping_sessions(&self, n: usize) {
        let repo = self.repo().display().to_string();
        let client = self.client();
        for _ in 0..n {
            client
                .create(&reconcile_api::CreateSession {
                    repo: repo.clone(),
                    command: vec!["sleep".into(), "3600".into()],
                    ..Default::default()
                })
                .unwrap();
        }
    }

    /// Every log file's text.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for entry in std::fs::read_dir(self.home.join("logs")).unwrap() {
            all.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
        }
        all
    }
}

impl Env {
    /// The identity the run-file claims for the daemon, if it is readable.
    pub fn daemon_identity(&self) -> Option<reconcile_core::ProcessIdentity> {
        let run = read_run_file(&self.home.join("daemon.json")).ok()?;
        Some(reconcile_core::ProcessIdentity {
            boot_id: run.boot_id,
            pid: run.pid,
            start_ticks: run.start_ticks,
        })
    }

    /// Stop the daemon the run-file names, through its verified identity (SIGTERM, then SIGKILL
    /// after `grace`; a zero grace is a crash). It need not be this test's child.
    pub fn stop_recorded_daemon(&self, grace: Duration) {
        let boot = reconcile_proc::boot_id().unwrap();
        let identity = self.daemon_identity().expect("a run-file names the daemon");
        reconcile_proc::stop_process_group(&boot, &identity, grace).unwrap();
    }

    /// Whether the process the run-file names is alive with that identity.
    pub fn daemon_alive(&self) -> bool {
        self.daemon_identity().is_some_and(|id| alive(&id))
    }

    /// Subscribe to the daemon's event stream (`/v1/events`), kept open up to the deadline.
    pub fn events(&self) -> reqwest::blocking::Response {
        let events = reqwest::blocking::Client::builder()
            .timeout(DEADLINE)
            .build()
            .unwrap()
            .get(self.url("/v1/events"))
            .bearer_auth(self.token())
            .send()
            .unwrap();
        assert_eq!(events.status(), 200);
        events
    }

    /// Run `reconcile takeover --json` and parse its output; panics on failure.
    pub fn takeover(&self) -> serde_json::Value {
        serde_json::from_str(&ok(self.cli(&["takeover", "--json"]))).unwrap()
    }
}

/// Wait on `pid`'s pidfd until it exits (`true`) or `timeout` passes (`false`).
pub fn exits_within(pid: u32, timeout: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else {
        return true;
    };
    let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        return true;
    };
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let wait = Timespec {
            tv_sec: left.as_secs() as _,
            tv_nsec: left.subsec_nanos() as _,
        };
        let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
        let _ = poll(&mut fds, Some(&wait));
        if fds[0].revents().contains(PollFlags::IN) {
            return true;
        }
        if left.is_zero() {
            return false;
        }
    }
}

/// Whether `identity` names a live process (same pid, start ticks and boot).
pub fn alive(identity: &reconcile_core::ProcessIdentity) -> bool {
    let boot = reconcile_proc::boot_id().unwrap();
    reconcile_proc::identity(&boot, identity.pid)
        .ok()
        .flatten()
        .as_ref()
        == Some(identity)
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(mut child) = self.daemon.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let boot = reconcile_proc::boot_id().unwrap_or_default();
        // A daemon a takeover started is not our child: stop it through its verified identity.
        if let Some(identity) = self.daemon_identity() {
            let _ = reconcile_proc::stop_process_group(&boot, &identity, Duration::from_secs(5));
        }
        // Whatever this test's sessions left running, even when the test failed.
        let db = self.home.join("reconcile.db");
        if db.exists()
            && let Ok(instance) = reconcile_store::Store::open(&db).and_then(|s| s.instance_id())
        {
            reconcile_proc::reap_instance(&boot, &instance, Duration::from_secs(1));
        }
    }
}

/// stdout of a successful run, or a panic with everything it printed.
pub fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "failed with {}:\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// `reconcile report --json`, parsed.
pub fn report_json(env: &Env) -> serde_json::Value {
    serde_json::from_str(&ok(env.cli(&["report", "--json"]))).unwrap()
}

/// Everything the pool pass of a report changed or failed to change (renewals are routine).
pub fn pool_actions(report: &serde_json::Value) -> u64 {
    [
        "leases_reaped_unowned",
        "leases_reaped_stale",
        "leases_released_session_ended",
        "slots_returned",
        "slots_removed",
        "slots_retired",
        "slots_half_made_removed",
        "windows_closed",
        "failed",
    ]
    .iter()
    .map(|k| report["pool"][k].as_u64().unwrap_or(0))
    .sum()
}

/// The median of timed samples, for the benchmarks.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// A duration in milliseconds, for the benchmarks' tables.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Rows counted under (evidence, disposition) over every pass of a report.
pub fn count(report: &serde_json::Value, evidence: &str, disposition: &str) -> u64 {
    report["counts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["evidence"] == evidence && c["disposition"] == disposition)
        .map(|c| c["count"].as_u64().unwrap())
        .sum()
}
