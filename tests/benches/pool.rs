//! Benchmark: session start latency from a warm slot of a window against creating a worktree,
//! on a repository of 20,000 files generated here, through the real daemon's HTTP API. Both are
//! measured in the same run, alternately, each after the pool has refilled (so a background
//! `git worktree add` never competes with a measurement); the cold start is the baseline.
//!
//! Run: `scripts/bench` (it builds the release binaries first).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use reconcile_api::{Client, CreateSession, OpenWindow};
use reconcile_e2e::{DEADLINE, Env, median, ms};
use reconcile_testkit::{sh, wait_for};

const FILES: usize = 20_000;
const SLOTS: u32 = 4;
const ROUNDS: usize = 9;

fn generate(repo: &Path) {
    for d in 0..FILES / 100 {
        let dir = repo.join(format!("src/m{d:03}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            fs::write(
                dir.join(format!("f{f:03}.rs")),
                format!("// module {d} file {f}\npub fn f{f}() -> usize {{ {d} * {f} }}\n"),
            )
            .unwrap();
        }
    }
    sh(
        repo,
        "git init -q -b main . && git config user.name B && git config user.email b@example.com \
         && git add -A && git commit -q -m generated",
    );
}

fn settle(client: &Client, window: &str) {
    wait_for("the pool to refill", DEADLINE, || {
        let w = client.window(window).unwrap();
        w.provisioning == 0 && w.free() == SLOTS as usize
    });
}

fn start(client: &Client, request: CreateSession) -> Duration {
    let started = Instant::now();
    let session = client.create(&request).unwrap();
    let elapsed = started.elapsed();
    assert_eq!(session.state.as_str(), "running");
    elapsed
}

fn main() {
    let mut env = Env::new("bench-pool");
    let repo = env.home.parent().unwrap().join("big");
    fs::create_dir_all(&repo).unwrap();
    generate(&repo);
    let files = sh(&repo, "git ls-files | wc -l")
        .trim()
        .parse::<usize>()
        .unwrap();
    assert!(files >= FILES, "{files} files");
    env.start();
    let client = env.client();
    let window = client
        .open_window(&OpenWindow {
            repo: repo.display().to_string(),
            slots: SLOTS,
            name: Some("bench".into()),
        })
        .unwrap()
        .id;
    let request = |window: Option<&str>| CreateSession {
        repo: repo.display().to_string(),
        command: vec!["sleep".into(), "600".into()],
        window: window.map(str::to_owned),
        ..Default::default()
    };
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        settle(&client, &window);
        cold.push(start(&client, request(None)));
        settle(&client, &window);
        warm.push(start(&client, request(Some(&window))));
    }
    let (cold, warm) = (median(cold), median(warm));
    let _ = env.cli(&["daemon", "stop", "--stop-sessions"]);

    println!(
        "session start through the API on a {files}-file repository (median of {ROUNDS}, alternating)"
    );
    println!("| start | time | ratio to a cold start |");
    println!("|---|---:|---:|");
    println!(
        "| baseline: cold, `git worktree add` on a new branch | {:.1} ms | 1.00x |",
        ms(cold)
    );
    println!(
        "| warm slot of a window | {:.1} ms | {:.2}x ({:.0}x faster) |",
        ms(warm),
        warm.as_secs_f64() / cold.as_secs_f64(),
        cold.as_secs_f64() / warm.as_secs_f64()
    );
}
