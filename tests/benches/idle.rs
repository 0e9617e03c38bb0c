//! Benchmark: an idle daemon holding 100 sessions over 60 seconds: CPU time and resident memory,
//! against the tmux server that holds the same sessions, measured over the same 60 seconds.
//!
//! Run: `scripts/bench`.

use std::time::{Duration, Instant};

use reconcile_e2e::Env;

const SESSIONS: usize = 100;
const WINDOW: Duration = Duration::from_secs(60);

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// VmRSS of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap()
}

fn main() {
    let env = Env::new("bench-idle");
    env.takeover();
    env.sleeping_sessions(SESSIONS);
    let daemon = env.daemon_identity().unwrap().pid;
    let tmux = env.socket.server_pid().unwrap();
    let ticks_per_second = 100.0; // USER_HZ on Linux
    let (d0, t0) = (cpu_ticks(daemon), cpu_ticks(tmux));
    let started = Instant::now();
    // The measurement window: the daemon is left alone for 60 s, watched through its pidfd.
    assert!(
        !reconcile_e2e::exits_within(daemon, WINDOW),
        "the daemon exited during the window"
    );
    let seconds = started.elapsed().as_secs_f64();
    let (d1, t1) = (cpu_ticks(daemon), cpu_ticks(tmux));
    let cpu = |a: u64, b: u64| (b - a) as f64 / ticks_per_second / seconds * 100.0;
    let (daemon_cpu, tmux_cpu) = (cpu(d0, d1), cpu(t0, t1));
    let (daemon_rss, tmux_rss) = (rss_kib(daemon), rss_kib(tmux));
    reconcile_e2e::ok(env.cli(&["daemon", "stop", "--stop-sessions"]));

    println!("idle bench: {SESSIONS} sessions, {seconds:.0} s, daemon swept every 2 s");
    println!("| process | CPU (% of one core) | RSS |");
    println!("|---|---:|---:|");
    println!(
        "| reconciled | {daemon_cpu:.2} % | {:.1} MiB |",
        daemon_rss as f64 / 1024.0
    );
    println!(
        "| tmux server (baseline: holds the same sessions) | {tmux_cpu:.2} % | {:.1} MiB |",
        tmux_rss as f64 / 1024.0
    );
    println!(
        "ratio: the daemon uses {:.2}x the tmux server's CPU and {:.2}x its memory",
        daemon_cpu / tmux_cpu.max(0.01),
        daemon_rss as f64 / tmux_rss as f64
    );
}
