//! The daemon's life: start-up, crash and reboot, graceful stops, the single-instance lock, a
//! taken port, and noticing dead sessions while it runs.

use std::fs;
use std::net::TcpListener;
use std::time::Duration;

use reconcile_e2e::{DEADLINE, Env, count, ok, report_json};
use reconcile_testkit::{sh, wait_for};

#[test]
fn after_sigkill_the_next_daemon_adopts_the_living_and_preserves_the_dead() {
    let mut env = Env::new("e2e-crash");
    env.start();
    let repo = env.repo();
    let alive = env.session("exec sleep 600");
    let dead = env.session("exec sleep 600");
    let dead_view = env.client().session(&dead).unwrap();
    fs::write(
        format!("{}/unsaved.txt", dead_view.worktree),
        "the agent's work\n",
    )
    .unwrap();
    let first_pid = env.pid();

    env.kill9();
    env.socket.kill_session(&format!("rc-{dead}"));
    env.start();

    let run = env.run_file();
    assert_eq!(run.pid, env.pid());
    assert_ne!(run.pid, first_pid);
    let client = env.client();
    assert_eq!(client.session(&alive).unwrap().state.as_str(), "running");
    let d = client.session(&dead).unwrap();
    assert_eq!(d.state.as_str(), "terminated");
    let reference = d
        .preserved_ref
        .expect("the dead session's work is preserved");
    assert_eq!(
        sh(&repo, &format!("git show {reference}:unsaved.txt")),
        "the agent's work\n"
    );
    assert_eq!(env.socket.sessions(), vec![format!("rc-{alive}")]);

    let report = report_json(&env);
    assert_eq!(report["kind"], "boot");
    assert_eq!(count(&report, "alive", "adopt"), 1, "{report}");
    assert_eq!(
        count(&report, "confirmed_dead", "preserve_and_terminate"),
        1,
        "{report}"
    );
}

#[test]
fn a_second_daemon_on_the_same_home_is_refused_and_the_first_keeps_serving() {
    let mut env = Env::new("e2e-lock");
    env.start();
    let second = env.spawn_daemon().wait_with_output().unwrap();
    assert!(!second.status.success());
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another reconciled already serves"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("pid {}", env.pid())), "{stderr}");
    assert_eq!(env.client().health().unwrap().pid, env.pid());
    assert_eq!(
        env.run_file().pid,
        env.pid(),
        "the run-file still names the first"
    );
}

#[test]
fn the_run_file_has_every_field_mode_0600_and_the_daemon_leads_its_group() {
    use std::os::unix::fs::MetadataExt;
    let mut env = Env::new("e2e-runfile");
    env.start();
    let path = env.home.join("daemon.json");
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    for field in [
        "pid",
        "port",
        "boot_id",
        "start_ticks",
        "instance_id",
        "version",
        "token",
    ] {
        assert!(!json[field].is_null(), "run-file lacks {field}: {json}");
    }
    assert_eq!(json["port"], env.port);
    let stat = fs::read_to_string(format!("/proc/{}/stat", env.pid())).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    assert_eq!(fields[2], env.pid().to_string(), "pgid == pid");
    assert_eq!(fields[3], env.pid().to_string(), "sid == pid");
    assert_eq!(fields[19], json["start_ticks"].to_string());
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(json["boot_id"], boot.trim());
}

#[test]
fn sigterm_leaves_sessions_running_and_the_next_daemon_adopts_them() {
    let mut env = Env::new("e2e-term");
    env.start();
    let id = env.session("exec sleep 600");
    let status = env.sigterm();
    assert!(status.success(), "graceful exit: {status}");
    assert!(
        !env.home.join("daemon.json").exists(),
        "a clean exit removes its run-file"
    );
    assert_eq!(
        env.socket.sessions(),
        vec![format!("rc-{id}")],
        "the session survives"
    );
    env.start();
    assert_eq!(env.client().session(&id).unwrap().state.as_str(), "running");
    let report = report_json(&env);
    assert_eq!(count(&report, "alive", "adopt"), 1, "{report}");
}

#[test]
fn stop_with_sessions_saves_them_and_the_next_start_restores_them() {
    let mut env = Env::new("e2e-save");
    env.start();
    let marker = env.dir.path().join("launches");
    let script = format!("echo launched >> {}; exec sleep 600", marker.display());
    let a = env.session(&script);
    let b = env.session(&script);
    let out = ok(env.cli(&["daemon", "stop", "--stop-sessions"]));
    assert!(out.contains("saved"), "{out}");
    assert!(env.wait_exit().success());
    wait_for("the tmux server to go", DEADLINE, || {
        env.socket.sessions().is_empty()
    });

    env.start();
    let client = env.client();
    for id in [&a, &b] {
        assert_eq!(client.session(id).unwrap().state.as_str(), "running");
    }
    let mut names = env.socket.sessions();
    names.sort();
    let mut want = vec![format!("rc-{a}"), format!("rc-{b}")];
    want.sort();
    assert_eq!(names, want);
    wait_for("both restored commands to run", DEADLINE, || {
        fs::read_to_string(&marker).is_ok_and(|t| t.lines().count() == 4)
    });
}

#[test]
fn a_taken_port_names_its_holder() {
    let env = Env::new("e2e-port");
    let holder = TcpListener::bind(("127.0.0.1", env.port)).unwrap();
    let out = env.spawn_daemon().wait_with_output().unwrap();
    drop(holder);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "port {} on 127.0.0.1 is taken by process {}",
            env.port,
            std::process::id()
        )),
        "{stderr}"
    );
    assert!(
        !env.home.join("daemon.json").exists(),
        "no run-file for a daemon that never served"
    );
}

#[test]
fn a_running_daemon_notices_a_dead_session_and_announces_it() {
    use std::io::{BufRead, BufReader};
    let mut env = Env::new("e2e-sweep");
    env.start();
    let id = env.session("exec sleep 600");
    let events = env.events();
    env.socket.kill_session(&format!("rc-{id}"));

    let mut reader = BufReader::new(events);
    let mut line = String::new();
    let mut seen = Vec::new();
    let found = loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            break false;
        }
        seen.push(line.clone());
        if line.starts_with("data:") && line.contains(&id) && line.contains("\"terminated\"") {
            break true;
        }
    };
    assert!(found, "no terminated event for {id}: {seen:?}");
    assert_eq!(
        env.client().session(&id).unwrap().state.as_str(),
        "terminated"
    );
}

/// `/healthz` answers at once; `/readyz` is 503 while the boot reconcile runs. Here it runs long
/// because the tmux server is stopped (SIGSTOP, our own server): the probe times out, the row is
/// preserved as unknown, and the daemon becomes ready anyway, while tmux is still stopped.
#[test]
fn healthz_at_once_readyz_after_reconcile_even_with_tmux_wedged() {
    let mut env = Env::new("e2e-ready");
    env.start();
    let id = env.session("exec sleep 600");
    env.kill9();
    let frozen = env.socket.freeze();

    let daemon = env.spawn_daemon();
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    wait_for("/healthz", DEADLINE, || {
        http.get(env.url("/healthz"))
            .send()
            .is_ok_and(|r| r.status() == 200)
    });
    let ready = http.get(env.url("/readyz")).send().unwrap();
    let status = ready.status().as_u16();
    let body: serde_json::Value = ready.json().unwrap();
    // Ready while tmux is still wedged: the probe timed out and proved nothing.
    env.adopt(daemon);
    env.wait_ready();
    drop(frozen);
    assert_eq!(
        (status, body["status"].as_str()),
        (503, Some("reconciling"))
    );
    let report = report_json(&env);
    assert_eq!(count(&report, "unknown", "preserve"), 1, "{report}");
    assert_eq!(
        env.client().session(&id).unwrap().state.as_str(),
        "running",
        "preserved, not terminated"
    );
    assert_eq!(
        env.socket.sessions(),
        vec![format!("rc-{id}")],
        "nothing destroyed"
    );
}
