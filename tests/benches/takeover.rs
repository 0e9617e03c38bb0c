//! Benchmark: whole-process time of `reconcile takeover` when it reuses a ready daemon, when it
//! spawns one, and when it replaces a stopped daemon holding 100 sessions; medians of repeated
//! runs, each against a baseline measured in the same run: `reconcile --version`, the cost of
//! starting the CLI process at all.
//!
//! Run: `scripts/bench` (it builds the release binaries first).

use std::process::Stdio;
use std::time::{Duration, Instant};

use reconcile_e2e::{Env, bin, median, ms, ok};

fn timed(env: &Env, args: &[&str]) -> Duration {
    let started = Instant::now();
    let out = env
        .command(&bin("reconcile"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    ok(out);
    elapsed
}

fn stop_signal(pid: u32, signal: rustix::process::Signal) {
    rustix::process::kill_process(rustix::process::Pid::from_raw(pid as i32).unwrap(), signal)
        .unwrap();
}

fn main() {
    let env = Env::new("bench-takeover");
    let baseline = median((0..20).map(|_| timed(&env, &["--version"])).collect());

    // Spawn: no daemon runs; stop it after each run.
    let spawn = median(
        (0..7)
            .map(|_| {
                let t = timed(&env, &["takeover", "--json"]);
                ok(env.cli(&["daemon", "stop"]));
                t
            })
            .collect(),
    );

    // Reuse: a ready daemon.
    env.takeover();
    let reuse = median(
        (0..20)
            .map(|_| timed(&env, &["takeover", "--json"]))
            .collect(),
    );

    // Replace: a stopped daemon holding 100 sessions.
    env.sleeping_sessions(100);
    let replace = median(
        (0..5)
            .map(|_| {
                let pid = env.daemon_identity().unwrap().pid;
                // This bench's own daemon, named by its own run-file.
                stop_signal(pid, rustix::process::Signal::STOP);
                timed(&env, &["takeover", "--json"])
            })
            .collect(),
    );
    let running = env
        .client()
        .sessions()
        .unwrap()
        .iter()
        .filter(|s| s.state.as_str() == "running")
        .count();
    assert_eq!(running, 100, "every session survives the replacements");
    ok(env.cli(&["daemon", "stop", "--stop-sessions"]));

    println!("takeover bench (whole-process time, median)");
    println!("| case | time | ratio to `reconcile --version` |");
    println!("|---|---:|---:|");
    println!(
        "| baseline: `reconcile --version` | {:.1} ms | 1.0x |",
        ms(baseline)
    );
    for (case, d) in [
        ("reuse a ready daemon", reuse),
        ("spawn a daemon (no sessions)", spawn),
        ("replace a stopped daemon holding 100 sessions", replace),
    ] {
        println!(
            "| {case} | {:.1} ms | {:.1}x |",
            ms(d),
            d.as_secs_f64() / baseline.as_secs_f64()
        );
    }
}
