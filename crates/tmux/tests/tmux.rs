//! The tmux runtime against a real tmux server on a private socket.

use std::fs;
use std::process::Command;
use std::time::Duration;

use reconcile_core::{Marker, OwnerMarker, Secret, SessionId, TmuxProbe};
use reconcile_proc::ChildCount;
use reconcile_testkit::TmuxSocket;
use reconcile_tmux::{Create, Destroyed, Error, Tmux};

/// A tmux server of this test's own (killed on drop through the socket guard).
struct Server {
    tmux: Tmux,
    socket: TmuxSocket,
    dir: tempfile::TempDir,
}

impl Server {
    fn new(tag: &str) -> Server {
        let socket = TmuxSocket::new(tag);
        let boot = reconcile_proc::boot_id().unwrap();
        Server {
            tmux: Tmux::new(socket.name.clone(), boot, ChildCount::default()),
            socket,
            dir: tempfile::tempdir().unwrap(),
        }
    }
}

fn marker(session: &str) -> OwnerMarker {
    OwnerMarker {
        instance: "inst".into(),
        session: SessionId::parse(session).unwrap(),
    }
}

fn wait_for(what: &str, done: impl FnMut() -> bool) {
    reconcile_testkit::wait_for(what, Duration::from_secs(20), done);
}

#[test]
fn create_probe_destroy() {
    let s = Server::new("cpd");
    assert_eq!(s.tmux.probe(), TmuxProbe::NoServer);

    let out = s.dir.path().join("env");
    let script = format!(
        "env > {}.tmp && mv {0}.tmp {0}; exec sleep 600",
        out.display()
    );
    let command = vec!["sh".to_owned(), "-c".to_owned(), script];
    let token = Secret::new("tok-create-probe".into());
    let m = marker("s-1");
    let handle = s
        .tmux
        .create(&Create {
            name: "rc-s-1",
            dir: s.dir.path(),
            command: &command,
            marker: &m,
            resume_token: Some(&token),
        })
        .unwrap();
    assert!(handle.is_recorded(), "{handle:?}");

    wait_for("the command's environment", || out.exists());
    let env = fs::read_to_string(&out).unwrap();
    assert!(env.contains("RECONCILE_OWNER=inst/s-1\n"), "{env}");
    assert!(
        env.contains("RECONCILE_RESUME_TOKEN=tok-create-probe\n"),
        "{env}"
    );
    assert!(
        env.contains(&format!("PWD={}\n", s.dir.path().display())),
        "{env}"
    );

    // The server's global environment keeps neither.
    let global = Command::new("tmux")
        .args(["-L", s.tmux.socket(), "show-environment", "-g"])
        .output()
        .unwrap();
    let global = String::from_utf8_lossy(&global.stdout);
    assert!(
        !global.contains("tok-create-probe") && !global.contains("RECONCILE_OWNER="),
        "{global}"
    );
    // Nor does the server process's own environment: it was started by a clean client.
    let server_env = std::fs::read(format!(
        "/proc/{}/environ",
        handle.server.as_ref().unwrap().pid
    ))
    .unwrap();
    let server_env = String::from_utf8_lossy(&server_env);
    assert!(
        !server_env.contains("tok-create-probe") && !server_env.contains("RECONCILE_OWNER="),
        "{server_env}"
    );

    let TmuxProbe::Listing(listing) = s.tmux.probe() else {
        panic!("expected a listing");
    };
    let found = listing.session("rc-s-1").unwrap();
    assert_eq!(Some(&found.id), handle.id.as_ref());
    assert_eq!(listing.server, handle.server);
    assert_eq!(found.pane, handle.pane);
    assert_eq!(found.marker, Marker::Present("inst/s-1".into()));

    assert_eq!(s.tmux.destroy(&handle).unwrap(), Destroyed::Destroyed);
    assert_eq!(s.tmux.destroy(&handle).unwrap(), Destroyed::NotFound);
    // The last session is gone, so the server exits; once it has, tmux says so.
    s.socket.kill_server();
    assert_eq!(s.tmux.probe(), TmuxProbe::NoServer);
}

#[test]
fn a_taken_name_is_a_typed_error_and_ids_tell_sessions_apart() {
    let s = Server::new("dup");
    let command = vec!["sleep".to_owned(), "600".to_owned()];
    let m = marker("s-2");
    let spec = Create {
        name: "rc-s-2",
        dir: s.dir.path(),
        command: &command,
        marker: &m,
        resume_token: None,
    };
    let first = s.tmux.create(&spec).unwrap();
    assert!(matches!(
        s.tmux.create(&spec),
        Err(Error::DuplicateSession { .. })
    ));

    // Destroy, then reuse the name: the old handle does not reach the new session.
    s.tmux.destroy(&first).unwrap();
    s.socket.kill_server();
    let keep = s
        .tmux
        .create(&Create {
            name: "keeper",
            ..spec
        })
        .unwrap();
    let second = s.tmux.create(&spec).unwrap();
    assert_ne!(first.id, second.id);
    assert_eq!(s.tmux.destroy(&first).unwrap(), Destroyed::NotFound);
    let TmuxProbe::Listing(listing) = s.tmux.probe() else {
        panic!("expected a listing");
    };
    assert!(
        listing.session("rc-s-2").is_some(),
        "the new session must survive"
    );

    // Same server and id, another name: tmux checks inside the server and kills nothing.
    let impostor = reconcile_core::TmuxHandle {
        name: "rc-other".into(),
        ..keep.clone()
    };
    assert_eq!(s.tmux.destroy(&impostor).unwrap(), Destroyed::NotFound);
    let unrecorded = reconcile_core::TmuxHandle::intent("keeper".into());
    assert!(matches!(
        s.tmux.destroy(&unrecorded),
        Err(Error::Unrecorded { .. })
    ));
    let TmuxProbe::Listing(listing) = s.tmux.probe() else {
        panic!("expected a listing");
    };
    assert!(listing.session("keeper").is_some(), "keeper must survive");
    s.tmux.destroy(&keep).unwrap();
}

#[test]
fn a_session_without_a_token_gets_none() {
    let s = Server::new("notok");
    let out = s.dir.path().join("env");
    let script = format!(
        "env > {}.tmp && mv {0}.tmp {0}; exec sleep 600",
        out.display()
    );
    let command = vec!["sh".to_owned(), "-c".to_owned(), script];
    // A first session with a token, then one without: the second must not inherit it.
    let with = vec!["sleep".to_owned(), "600".to_owned()];
    let (m1, m2) = (marker("s-a"), marker("s-b"));
    let token = Secret::new("tok-first".into());
    s.tmux
        .create(&Create {
            name: "a",
            dir: s.dir.path(),
            command: &with,
            marker: &m1,
            resume_token: Some(&token),
        })
        .unwrap();
    s.tmux
        .create(&Create {
            name: "b",
            dir: s.dir.path(),
            command: &command,
            marker: &m2,
            resume_token: None,
        })
        .unwrap();
    wait_for("the command's environment", || out.exists());
    let env = fs::read_to_string(&out).unwrap();
    assert!(!env.contains("RECONCILE_RESUME_TOKEN"), "{env}");
    assert!(env.contains("RECONCILE_OWNER=inst/s-b\n"), "{env}");
}

#[test]
fn a_stopped_server_is_unknown_not_dead() {
    let s = Server::new("stopped");
    let tmux = s.tmux.clone().with_timeout(Duration::from_millis(500));
    let command = vec!["sleep".to_owned(), "600".to_owned()];
    let m = marker("s-3");
    let handle = tmux
        .create(&Create {
            name: "rc-s-3",
            dir: s.dir.path(),
            command: &command,
            marker: &m,
            resume_token: None,
        })
        .unwrap();
    // The test's own server on its private socket; continued on drop even if this test fails.
    let frozen = s.socket.freeze();
    let probe = tmux.probe();
    let destroy = tmux.destroy(&handle);
    drop(frozen);
    assert_eq!(probe, TmuxProbe::Failed);
    assert!(matches!(destroy, Err(Error::Run(_))), "{destroy:?}");
}

#[test]
fn every_call_is_counted() {
    let count = ChildCount::default();
    let boot = reconcile_proc::boot_id().unwrap();
    let tmux = Tmux::new(
        format!("rc-test-count-{}", std::process::id()),
        boot,
        count.clone(),
    );
    tmux.probe();
    tmux.probe();
    assert_eq!(count.get(), 2);
}
