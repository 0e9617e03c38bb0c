//! Orphan processes through the real daemon: `reconcile session stop`, and a boot after a crash,
//! end everything a session started, and nothing else.

use std::process::{Child, Command};

use reconcile_core::ProcessIdentity;
use reconcile_e2e::{DEADLINE, Env, alive, ok, report_json};
use reconcile_testkit::{leaky_pids, leaky_script, wait_for};

/// Start the leaky session through the CLI; its id and the identities of what it left.
fn leaky(env: &Env) -> (String, Vec<ProcessIdentity>) {
    let dir = env.dir.path().join("leaky");
    std::fs::create_dir_all(&dir).unwrap();
    let id = env.session(&leaky_script(&dir));
    let boot = reconcile_proc::boot_id().unwrap();
    let procs = leaky_pids(&dir)
        .into_iter()
        .map(|(kind, pid)| {
            reconcile_proc::identity(&boot, pid)
                .unwrap()
                .unwrap_or_else(|| panic!("{kind} is not running"))
        })
        .collect();
    (id, procs)
}

/// An unmarked process with the same command line, and one with another instance's marker.
fn bystanders(session: &str) -> Vec<Child> {
    vec![
        Command::new("sleep")
            .arg("600")
            .env_remove("RECONCILE_OWNER")
            .spawn()
            .unwrap(),
        Command::new("sleep")
            .arg("600")
            .env("RECONCILE_OWNER", format!("0123456789abcdef/{session}"))
            .spawn()
            .unwrap(),
    ]
}

fn assert_alive_and_stop(mut children: Vec<Child>) {
    for child in &mut children {
        assert!(
            child.try_wait().unwrap().is_none(),
            "bystander {} was signalled",
            child.id()
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

#[test]
fn session_stop_ends_every_process_the_session_started() {
    let mut env = Env::new("e2e-orphan-stop");
    env.start();
    let (id, procs) = leaky(&env);
    let others = bystanders(&id);
    let keeper = env.session("nohup sleep 600 >/dev/null 2>&1 & exec sleep 600");

    ok(env.cli(&["session", "stop", &id]));
    wait_for(
        "every process of the stopped session to be gone",
        DEADLINE,
        || procs.iter().all(|p| !alive(p)),
    );
    assert_alive_and_stop(others);
    assert_eq!(
        env.client().session(&keeper).unwrap().state.as_str(),
        "running"
    );
    assert_eq!(env.socket.sessions(), vec![format!("rc-{keeper}")]);
}

#[test]
fn the_next_boot_reaps_what_a_crashed_daemons_session_left() {
    let mut env = Env::new("e2e-orphan-boot");
    env.start();
    let (id, procs) = leaky(&env);
    let others = bystanders(&id);
    env.kill9();
    env.socket.kill_server();
    assert!(
        procs.iter().all(alive),
        "the detached processes outlive tmux and the daemon"
    );

    env.start();
    wait_for("the orphans to be gone", DEADLINE, || {
        procs.iter().all(|p| !alive(p))
    });
    assert_eq!(
        env.client().session(&id).unwrap().state.as_str(),
        "terminated"
    );
    let report = report_json(&env);
    let orphans = &report["orphans"];
    let reaped = orphans["terminated"].as_u64().unwrap() + orphans["killed"].as_u64().unwrap();
    assert!(
        reaped >= 5 && orphans["killed"].as_u64().unwrap() >= 1,
        "{report}"
    );
    assert!(
        orphans["kept_other_instance"].as_u64().unwrap() >= 1,
        "{report}"
    );
    let text = ok(env.cli(&["report"]));
    assert!(text.contains("orphans:"), "{text}");
    assert_alive_and_stop(others);
}
