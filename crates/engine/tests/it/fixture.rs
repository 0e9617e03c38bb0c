//! A state directory, a private tmux server, a repository and the adapters, per test.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reconcile_core::{Report, Secret, Session, SessionId, TmuxProbe};
use reconcile_engine::{Host, NewSessionRequest, create_session, reconcile};
use reconcile_home::Home;
use reconcile_store::Store;
use reconcile_testkit::{TmuxSocket, repo, sh};

pub struct Fixture {
    pub socket: TmuxSocket,
    pub home: Home,
    pub store: Store,
    pub host: Host,
    pub repo: PathBuf,
    // Dropped last: the server above is stopped before the files go.
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new(tag: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let socket = TmuxSocket::new(tag);
        let home = Home::new(dir.path().join("home"));
        home.ensure().unwrap();
        let store = Store::open(&home.database()).unwrap();
        let host = Host::new(home.clone(), &socket.name, store.instance_id().unwrap()).unwrap();
        let repo = repo(dir.path());
        Fixture {
            socket,
            home,
            store,
            host,
            repo,
            dir,
        }
    }

    /// Start a session running `script` under `sh -c`.
    pub fn start(&self, script: &str, token: Option<&str>) -> Session {
        create_session(
            &self.store,
            &self.host,
            NewSessionRequest {
                repo: self.repo.clone(),
                name: Some("test".into()),
                command: vec!["sh".into(), "-c".into(), script.into()],
                resume_token: token.map(|t| Secret::new(t.into())),
                window: None,
            },
        )
        .unwrap()
    }

    pub fn reconcile(&self) -> Report {
        reconcile(&self.store, &self.host)
    }

    pub fn session(&self, id: &SessionId) -> Session {
        self.store.get(id).unwrap().unwrap()
    }

    pub fn tmux_sessions(&self) -> Vec<String> {
        self.socket.sessions()
    }

    /// Kill a session's tmux session from outside, as a crash or a user would.
    pub fn kill_tmux(&self, session: &Session) {
        let out = self.socket.tmux(&[
            "kill-session",
            "-t",
            &format!("={}", session.id.tmux_name()),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The tmux session id (`$N`) currently holding a name.
    pub fn tmux_id(&self, name: &str) -> Option<String> {
        match self.host.tmux.probe() {
            TmuxProbe::Listing(l) => l.session(name).map(|s| s.id.clone()),
            _ => None,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Fixture {
    /// Stop whatever this test's sessions left running (even when it failed); the tmux server
    /// goes with the socket guard.
    fn drop(&mut self) {
        reconcile_proc::reap_instance(
            &self.host.boot_id,
            &self.host.instance_id,
            Duration::from_secs(1),
        );
    }
}

/// Assert that a second reconcile takes no action and raises no warning.
pub fn assert_settled(f: &Fixture) {
    let again = f.reconcile();
    assert_eq!(
        again.actions(),
        0,
        "a second reconcile must take no action:\n{again}"
    );
    assert_eq!(
        again.warning_count(),
        0,
        "a second reconcile must repeat no warning:\n{again}"
    );
}

pub fn git(dir: &Path, args: &str) -> String {
    sh(dir, &format!("git {args}"))
}

pub const LONG: Duration = Duration::from_secs(30);
