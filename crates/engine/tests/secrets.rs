//! A planted resume token reaches the session's command and nothing else: no log line, report,
//! error string or debug output, on every path including failures.
//!
//! Its own test binary with one test, so the subscriber can be the global default: a scoped one
//! can miss events whose callsites other test threads registered first.

#[allow(dead_code)]
#[path = "it/fixture.rs"]
mod fixture;

use std::fs;
use std::io::Write;
use std::sync::{Arc, Mutex};

use reconcile_core::Secret;
use reconcile_engine::{NewSessionRequest, create_session};
use reconcile_testkit::wait_for;

use fixture::{Fixture, LONG};

const TOKEN: &str = "PLANTED-TOKEN-7f3a9c21e5";

/// Collects every log line at every level.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn the_resume_token_appears_nowhere_but_in_the_command() {
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let mut seen = String::new();
    let got = exercise(&mut seen);

    assert_eq!(got, TOKEN, "the command must receive the token");
    let logs = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("session started") && logs.contains("reconcile finished"),
        "logging is on:\n{logs}"
    );
    assert!(!logs.contains(TOKEN), "a log line holds the token:\n{logs}");
    assert!(
        !seen.contains(TOKEN),
        "a report, error or debug output holds the token:\n{seen}"
    );
}

/// Every path that handles a token: create (ok and failing), restore (ok and failing), a failed
/// preserve, a reap. Returns what the command received; appends all outputs to `seen`.
fn exercise(seen: &mut String) -> String {
    let f = Fixture::new("secret");
    let out = f.path("token");
    let token = || Some(Secret::new(TOKEN.into()));
    let script = format!(
        "printf %s \"$RECONCILE_RESUME_TOKEN\" > {0}.tmp && mv {0}.tmp {0}; exec sleep 600",
        out.display()
    );
    let request = |repo| NewSessionRequest {
        repo,
        name: None,
        command: vec!["sh".into(), "-c".into(), script.clone()],
        resume_token: token(),
        window: None,
    };

    let s = create_session(&f.store, &f.host, request(f.repo.clone())).unwrap();
    seen.push_str(&format!("{s:?}\n{:?}\n", f.store.list().unwrap()));
    wait_for("the token file", LONG, || out.exists());
    let got = fs::read_to_string(&out).unwrap();

    // Failing creates: not a repository, a missing command, a taken tmux name.
    let e = create_session(&f.store, &f.host, request(f.path("nowhere"))).unwrap_err();
    seen.push_str(&format!("{e}\n{e:?}\n"));
    let mut missing = request(f.repo.clone());
    missing.command = vec!["no-such-program-xyz".into()];
    let e = create_session(&f.store, &f.host, missing).unwrap_err();
    seen.push_str(&format!("{e}\n{e:?}\n"));

    // Restore that works, restore that fails (worktree gone), a failing preserve, a reap.
    let saved = create_session(&f.store, &f.host, request(f.repo.clone())).unwrap();
    f.store.mark_saved(&saved.id, 1).unwrap();
    f.kill_tmux(&saved);
    let broken = create_session(&f.store, &f.host, request(f.repo.clone())).unwrap();
    f.store.mark_saved(&broken.id, 1).unwrap();
    f.kill_tmux(&broken);
    fs::rename(&broken.worktree, f.path("moved-away")).unwrap();
    let dead = create_session(&f.store, &f.host, request(f.repo.clone())).unwrap();
    fs::write(dead.worktree.join(".git"), "gitdir: /nonexistent\n").unwrap();
    f.kill_tmux(&dead);
    let leaked = create_session(&f.store, &f.host, request(f.repo.clone())).unwrap();
    f.store.terminate(&leaked.id, "stopped", None, 1).unwrap();

    for _ in 0..2 {
        let report = f.reconcile();
        assert!(
            report.warning_count() >= 2,
            "the failing paths must have run:\n{report}"
        );
        seen.push_str(&format!(
            "{report}\n{report:?}\n{}\n",
            serde_json::to_string(&report).unwrap()
        ));
    }
    seen.push_str(&format!("{:?}\n", f.store.list().unwrap()));
    got
}
