//! `reconcile takeover`, `reconcile daemon restart` and `reconcile supervise`: whatever the last
//! daemon left, one healthy, ready daemon of ours, and nothing that is not ours is signalled.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::{Command, Stdio};
use std::time::Duration;

use reconcile_e2e::{DEADLINE, Env, alive, bin, ok};
use reconcile_testkit::wait_for;
use serde_json::Value;

fn write_run_file(env: &Env, contents: &[u8], mode: u32) {
    fs::create_dir_all(&env.home).unwrap();
    let path = env.home.join("daemon.json");
    let _ = fs::remove_file(&path);
    fs::write(&path, contents).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
}

fn run_file_naming(pid: u32, start_ticks: u64, port: u16) -> Vec<u8> {
    let boot = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    serde_json::to_vec(&serde_json::json!({
        "pid": pid, "port": port, "boot_id": boot.trim(), "start_ticks": start_ticks,
        "instance_id": "x", "version": "0.1.0", "token": "t"
    }))
    .unwrap()
}

fn start_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..]
        .split(' ')
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_second_takeover_reuses_the_first_daemon() {
    let env = Env::new("tk-reuse");
    let first = env.takeover();
    assert_eq!(first["action"], "spawned", "{first}");
    assert_eq!(first["port"], env.port);
    assert!(first["elapsed_ms"].is_u64());
    let second = env.takeover();
    assert_eq!(second["action"], "reused", "{second}");
    assert_eq!(second["pid"], first["pid"]);
    assert_eq!(env.run_file().pid as u64, first["pid"].as_u64().unwrap());
    let status: Value = serde_json::from_str(&ok(env.cli(&["status", "--json"]))).unwrap();
    assert_eq!(status["ready"], true);
}

#[test]
fn a_stopped_daemon_is_replaced_and_its_sessions_survive() {
    let env = Env::new("tk-stopped");
    env.takeover();
    let repo = env.repo().display().to_string();
    let id = ok(env.cli(&["session", "new", "--repo", &repo, "--", "sleep", "600"]))
        .trim()
        .to_owned();
    let tmux_before = env
        .socket
        .tmux(&["list-sessions", "-F", "#{session_name} #{session_id}"]);
    let old = env.daemon_identity().unwrap();
    // Our own daemon, identified through its run-file: SIGSTOP it.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(old.pid as i32).unwrap(),
        rustix::process::Signal::STOP,
    )
    .unwrap();

    let out = env.takeover();
    assert_eq!(out["action"], "replaced", "{out}");
    assert_ne!(out["pid"], old.pid);
    assert!(!alive(&old), "the old daemon is gone");
    let tmux_after = env
        .socket
        .tmux(&["list-sessions", "-F", "#{session_name} #{session_id}"]);
    assert_eq!(
        tmux_after.stdout, tmux_before.stdout,
        "the tmux sessions are untouched"
    );
    assert_eq!(env.client().session(&id).unwrap().state.as_str(), "running");
}

#[test]
fn a_run_file_naming_a_dead_pid_is_replaced_by_a_spawn() {
    let env = Env::new("tk-deadpid");
    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    write_run_file(&env, &run_file_naming(pid, 12345, env.port), 0o600);
    let out = env.takeover();
    assert_eq!(out["action"], "spawned", "{out}");
    assert_eq!(env.run_file().pid as u64, out["pid"].as_u64().unwrap());
}

#[test]
fn a_run_file_naming_a_live_unrelated_process_never_gets_it_signalled() {
    let env = Env::new("tk-liveother");
    let mut sleeper = Command::new("sleep").arg("600").spawn().unwrap();
    let ticks = start_ticks(sleeper.id());
    for claimed in [ticks + 1, ticks] {
        write_run_file(
            &env,
            &run_file_naming(sleeper.id(), claimed, env.port),
            0o600,
        );
        let out = env.takeover();
        assert_eq!(out["action"], "spawned", "{out}");
        assert!(
            sleeper.try_wait().unwrap().is_none(),
            "the sleep must be alive (claimed ticks {claimed})"
        );
        ok(env.cli(&["daemon", "stop"]));
    }
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn a_foreign_listener_is_refused_by_name_and_left_alone() {
    let env = Env::new("tk-foreign");
    let script = format!(
        "import socket,time\ns=socket.socket()\ns.bind(('127.0.0.1',{}))\ns.listen()\ntime.sleep(600)",
        env.port
    );
    let mut listener = Command::new("python3")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the listener", DEADLINE, || {
        std::net::TcpStream::connect(("127.0.0.1", env.port)).is_ok()
    });

    let out = env.cli(&["takeover", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("process {}", listener.id())) && stderr.contains("python3"),
        "{stderr}"
    );
    assert!(
        listener.try_wait().unwrap().is_none(),
        "the listener is alive"
    );
    assert!(
        !env.home.join("daemon.json").exists(),
        "no daemon was started"
    );
    listener.kill().unwrap();
    listener.wait().unwrap();
}

#[test]
fn eight_racing_takeovers_end_with_one_daemon() {
    let env = Env::new("tk-race");
    let racers: Vec<_> = (0..8)
        .map(|_| {
            env.command(&bin("reconcile"))
                .args(["takeover", "--json"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Value> = racers
        .into_iter()
        .map(|r| serde_json::from_str(&ok(r.wait_with_output().unwrap())).unwrap())
        .collect();
    let pid = env.run_file().pid;
    for out in &outs {
        assert_eq!(
            out["pid"], pid,
            "every racer reports the one daemon: {outs:?}"
        );
    }
    assert_eq!(
        outs.iter().filter(|o| o["action"] == "spawned").count(),
        1,
        "{outs:?}"
    );
    // Exactly one daemon process serves this home.
    let home = env.home.display().to_string();
    let daemons: Vec<u32> = fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let exe = fs::read_link(format!("/proc/{pid}/exe"))
                .map(|p| p.ends_with("reconciled"))
                .unwrap_or(false);
            let environ = fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            exe && environ
                .split(|b| *b == 0)
                .any(|v| v == format!("RECONCILE_HOME={home}").as_bytes())
        })
        .collect();
    assert_eq!(daemons, vec![pid]);
}

#[test]
fn every_bad_run_file_is_treated_as_absent() {
    let env = Env::new("tk-badfile");
    let mut sleeper = Command::new("sleep").arg("600").spawn().unwrap();
    let valid_for_sleeper = run_file_naming(sleeper.id(), start_ticks(sleeper.id()), env.port);
    let target = env.dir.path().join("elsewhere.json");
    fs::write(&target, &valid_for_sleeper).unwrap();
    fs::set_permissions(&target, fs::Permissions::from_mode(0o600)).unwrap();

    let variants: Vec<(&str, Vec<u8>, u32)> = vec![
        ("empty", vec![], 0o600),
        ("not JSON", b"hello, world".to_vec(), 0o600),
        (
            "truncated",
            valid_for_sleeper[..valid_for_sleeper.len() / 2].to_vec(),
            0o600,
        ),
        (
            "corrupt",
            b"{\"pid\": \"many\", \"port\": -1}".to_vec(),
            0o600,
        ),
        ("huge", vec![b' '; 10 * 1024 * 1024], 0o600),
        ("loose permissions", valid_for_sleeper.clone(), 0o666),
    ];
    for (what, contents, mode) in variants {
        write_run_file(&env, &contents, mode);
        let out = env.cli(&["takeover", "--json"]);
        assert!(out.status.success(), "{what}: {out:?}");
        ok(env.cli(&["daemon", "stop"]));
    }
    let link = env.home.join("daemon.json");
    let _ = fs::remove_file(&link);
    symlink(&target, &link).unwrap();
    let out = env.cli(&["takeover", "--json"]);
    assert!(out.status.success(), "symlink: {out:?}");
    assert_eq!(
        fs::read(&target).unwrap(),
        valid_for_sleeper,
        "the symlink's target is untouched"
    );
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the process the bad files named is alive"
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn restart_replaces_the_daemon_gracefully_and_sessions_survive() {
    let env = Env::new("tk-restart");
    env.takeover();
    let repo = env.repo().display().to_string();
    let id = ok(env.cli(&["session", "new", "--repo", &repo, "--", "sleep", "600"]))
        .trim()
        .to_owned();
    let old = env.daemon_identity().unwrap();
    let out: Value = serde_json::from_str(&ok(env.cli(&["daemon", "restart", "--json"]))).unwrap();
    assert_eq!(out["action"], "replaced", "{out}");
    assert!(!alive(&old));
    assert_eq!(env.client().session(&id).unwrap().state.as_str(), "running");
    assert_eq!(env.socket.sessions(), vec![format!("rc-{id}")]);
}

/// The supervisor's stderr, line by line, as it comes.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Wait for a line matching `want`; returns it, or panics with everything seen.
fn expect_line(
    rx: &std::sync::mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    want: impl Fn(&str) -> bool,
) -> String {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if want(&line) {
                    return line;
                }
            }
            Err(_) => panic!(
                "no expected line from the supervisor; it said:\n{}",
                seen.join("\n")
            ),
        }
    }
}

fn running_pid(line: &str) -> Option<u32> {
    line.strip_prefix("supervise: daemon ")?
        .strip_suffix(" running")?
        .parse()
        .ok()
}

#[test]
fn supervise_restarts_a_killed_daemon() {
    let env = Env::new("tk-supervise");
    let mut supervisor = env
        .command(&bin("reconcile"))
        .arg("supervise")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut supervisor);
    let mut seen = Vec::new();
    let first = running_pid(&expect_line(&rx, &mut seen, |l| running_pid(l).is_some())).unwrap();
    let identity = env.daemon_identity().unwrap();
    assert_eq!(identity.pid, first);
    // The daemon the supervisor started for this test's home, identified through its run-file.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(first as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    expect_line(&rx, &mut seen, |l| {
        l == format!("supervise: daemon {first} exited unexpectedly")
    });
    let second = running_pid(&expect_line(&rx, &mut seen, |l| running_pid(l).is_some())).unwrap();
    assert_ne!(second, first);
    assert!(env.client().ready().unwrap());
    assert_eq!(env.run_file().pid, second);

    // A stop on request ends supervision instead of being fought.
    ok(env.cli(&["daemon", "stop"]));
    expect_line(&rx, &mut seen, |l| {
        l == format!("supervise: daemon {second} stopped on request")
    });
    let status = supervisor.wait().unwrap();
    assert!(status.success(), "{status}: {seen:?}");
    assert!(!env.daemon_alive());
}

#[test]
fn supervise_gives_up_on_a_crash_loop() {
    let env = Env::new("tk-crashloop");
    // A database that is not one: the daemon refuses to start, every time.
    fs::create_dir_all(&env.home).unwrap();
    fs::write(
        env.home.join("reconcile.db"),
        b"definitely not sqlite ".repeat(100),
    )
    .unwrap();
    let out = env
        .command(&bin("reconcile"))
        .arg("supervise")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("crashed 5 times within 60 s"), "{stderr}");
    assert!(
        stderr.contains("reconcile.db"),
        "the last log lines say why: {stderr}"
    );
    assert_eq!(
        fs::read(env.home.join("reconcile.db")).unwrap(),
        b"definitely not sqlite ".repeat(100),
        "the file is untouched"
    );
    let _ = Duration::ZERO;
}

#[test]
fn a_daemon_started_from_inside_a_session_carries_neither_its_marker_nor_its_token() {
    let env = Env::new("tk-insidesession");
    let out = env
        .command(&bin("reconcile"))
        .args(["takeover", "--json"])
        .env("RECONCILE_OWNER", "someinstance/somesession")
        .env("RECONCILE_RESUME_TOKEN", "INSIDE-TOKEN-99")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let out: Value = serde_json::from_str(&ok(out)).unwrap();
    let environ = fs::read(format!("/proc/{}/environ", out["pid"])).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        !environ.contains("RECONCILE_OWNER") && !environ.contains("INSIDE-TOKEN-99"),
        "{environ}"
    );
    assert!(environ.contains("RECONCILE_HOME="), "{environ}");
}

/// A daemon that holds its lock but has not bound its port or written its run-file yet (a
/// launcher spawned it and died) is waited for, never doubled by a second spawn that would fail.
#[test]
fn a_daemon_still_starting_is_waited_for() {
    use std::io::{BufRead, BufReader};
    let env = Env::new("takeover-starting");
    fs::create_dir_all(&env.home).unwrap();
    // This test plays the starting daemon: it holds the lock.
    let lock = fs::File::create(env.home.join("daemon.lock")).unwrap();
    lock.lock().unwrap();
    let mut launcher = env
        .command(&bin("reconcile"))
        .arg("takeover")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut progress = BufReader::new(launcher.stderr.take().unwrap());
    let me = std::process::id();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(progress.read_line(&mut line).unwrap() > 0, "launcher ended");
        assert!(
            !line.contains("starting a daemon"),
            "spawned while a daemon starts"
        );
        if line.contains(&format!("daemon {me} is reconciling")) {
            break;
        }
    }
    drop(lock);
    let out = launcher.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("started"),
        "{out:?}"
    );
    assert!(env.daemon_alive());
}
