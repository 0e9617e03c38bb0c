//! The `reconcile` CLI as CONTRACT.md words it.

use std::fs;

use reconcile_e2e::{DEADLINE, Env, ok};
use reconcile_testkit::wait_for;
use serde_json::Value;

#[test]
fn sessions_from_the_command_line() {
    let mut env = Env::new("e2e-cli");
    env.start();
    let repo = env.repo();
    let repo_s = repo.display().to_string();
    let out = env.dir.path().join("argv");
    // Written aside and renamed, so the file appears complete or not at all.
    let script = format!(
        "printf '%s|' \"$@\" > {0}.tmp && mv {0}.tmp {0}; exec sleep 600",
        out.display()
    );
    let id = ok(env.cli(&[
        "session",
        "new",
        "--repo",
        &repo_s,
        "--name",
        "agent one",
        "--",
        "sh",
        "-c",
        &script,
        "sh",
        "a b",
        "--flag",
    ]));
    let id = id.trim();
    assert_eq!(id.len(), 10, "prints only the id: {id:?}");
    wait_for("the command to run", DEADLINE, || out.exists());
    assert_eq!(
        fs::read_to_string(&out).unwrap(),
        "a b|--flag|",
        "argv reaches the command intact"
    );

    let ls: Value = serde_json::from_str(&ok(env.cli(&["session", "ls", "--json"]))).unwrap();
    let item = &ls.as_array().unwrap()[0];
    assert_eq!(item["id"], id);
    assert_eq!(item["state"], "running");
    assert_eq!(item["tmux_session"], format!("rc-{id}"));
    assert!(item["worktree"].as_str().unwrap().ends_with(id));
    assert!(item["preserved_ref"].is_null());
    assert_eq!(item["name"], "agent one");

    let table = ok(env.cli(&["session", "ls"]));
    assert!(table.contains(id) && table.contains("running"), "{table}");
    let status = ok(env.cli(&["status"]));
    assert!(
        status.contains("ready") && status.contains("1 of 1 sessions running"),
        "{status}"
    );
    let status: Value = serde_json::from_str(&ok(env.cli(&["status", "--json"]))).unwrap();
    assert_eq!(status["pid"], env.pid());

    let worktree = item["worktree"].as_str().unwrap();
    fs::write(format!("{worktree}/draft.txt"), "draft\n").unwrap();
    let stopped = ok(env.cli(&["session", "stop", id]));
    assert!(
        stopped.contains(&format!("refs/reconcile/preserved/{id}")),
        "{stopped}"
    );
    let ls: Value = serde_json::from_str(&ok(env.cli(&["session", "ls", "--json"]))).unwrap();
    assert_eq!(ls[0]["state"], "terminated");
    assert_eq!(
        ls[0]["preserved_ref"],
        format!("refs/reconcile/preserved/{id}")
    );

    let report = ok(env.cli(&["report"]));
    assert!(report.contains("last reconcile: boot"), "{report}");
    let stop = env.cli(&["session", "stop", "nosuchid"]);
    assert_eq!(stop.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&stop.stderr).contains("no session nosuchid"),
        "{stop:?}"
    );
}

#[test]
fn without_a_daemon_the_cli_says_how_to_start_one() {
    let env = Env::new("e2e-nodaemon");
    for args in [&["session", "ls"][..], &["status"], &["report", "--json"]] {
        let out = env.cli(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("no daemon is running") && stderr.contains("reconcile takeover"),
            "{stderr}"
        );
    }
}

#[test]
fn the_resume_token_can_come_from_stdin() {
    let mut env = Env::new("e2e-stdin");
    env.start();
    let repo = env.repo().display().to_string();
    let out = env.dir.path().join("token");
    let script = format!(
        "printf %s \"$RECONCILE_RESUME_TOKEN\" > {}; exec sleep 600",
        out.display()
    );
    let id = ok(env.cli_with_stdin(
        &[
            "session",
            "new",
            "--repo",
            &repo,
            "--resume-token",
            "-",
            "--",
            "sh",
            "-c",
            &script,
        ],
        "from-stdin-123\n",
    ));
    assert!(!id.trim().is_empty());
    wait_for("the command to run", DEADLINE, || {
        fs::metadata(&out).is_ok_and(|m| m.len() > 0)
    });
    assert_eq!(fs::read_to_string(&out).unwrap(), "from-stdin-123");
}
