//! Random crash chaos: each round starts a real daemon with sessions, crashes it at a random
//! failpoint or after a random delay during a random operation, runs `reconcile takeover`, and
//! checks every invariant. The seed is printed first, so a failing run can be replayed.
//!
//! Every round has a window with a warm pool and a session in one of its slots, so the pool
//! invariants (LEAK-003) are checked after every crash, not only after the window operations.
//!
//! Run: `scripts/chaos [--seed N] [--rounds N]`; `scripts/chaos --all` instead crashes the daemon
//! once at every failpoint of create, stop, stop-with-sessions, window open (provisioning) and
//! window close, and prints a Markdown table.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reconcile_e2e::Env;
use reconcile_e2e::chaos::{
    busy_session, died_at, open_window, recover_and_check, start_at, wait_ready_or_dead,
    window_session, worktrees,
};

/// xorshift64*: small, deterministic, good enough to pick scenarios.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy, Debug)]
enum Operation {
    Create,
    Stop,
    StopWithSessions,
    /// `session new --window`: a warm slot under a lease.
    WindowSession,
    /// `window open`: provisioning in the background.
    OpenWindow,
    CloseWindow,
}

const OPERATIONS: [Operation; 6] = [
    Operation::Create,
    Operation::Stop,
    Operation::StopWithSessions,
    Operation::WindowSession,
    Operation::OpenWindow,
    Operation::CloseWindow,
];

const FAILPOINTS: &[(&str, Operation)] = &[
    ("create.after_row", Operation::Create),
    ("create.after_worktree", Operation::Create),
    ("create.after_tmux", Operation::Create),
    ("stop.after_destroy", Operation::Stop),
    ("terminate.before_preserve", Operation::Stop),
    ("terminate.after_preserve", Operation::Stop),
    ("save.after_mark", Operation::StopWithSessions),
    ("save.after_teardown", Operation::StopWithSessions),
    ("create.after_row", Operation::WindowSession),
    ("create.after_tmux", Operation::WindowSession),
    ("pool.after_row", Operation::OpenWindow),
    ("pool.after_worktree", Operation::OpenWindow),
    ("window.after_closing", Operation::CloseWindow),
    ("pool.after_remove_worktree", Operation::CloseWindow),
];

fn arg(name: &str) -> Option<u64> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

/// What every round starts from: two cold sessions (the first is the victim of a stop), and a
/// window with a session in one of its slots.
fn setup(env: &Env) -> (String, String) {
    let victim = busy_session(env);
    busy_session(env);
    let window = open_window(env, 2);
    window_session(env, &window);
    (victim, window)
}

fn operate(env: &Env, operation: Operation, victim: &str, window: &str) -> std::process::Child {
    let args: Vec<&str> = match operation {
        Operation::Create => vec![
            "session",
            "new",
            "--repo",
            "REPO",
            "--",
            "sh",
            "-c",
            "echo wip > wip.txt; exec sleep 600",
        ],
        Operation::Stop => vec!["session", "stop", victim],
        Operation::StopWithSessions => vec!["daemon", "stop", "--stop-sessions"],
        Operation::WindowSession => vec![
            "session",
            "new",
            "--window",
            window,
            "--",
            "sh",
            "-c",
            "echo wip > wip.txt; exec sleep 600",
        ],
        Operation::OpenWindow => vec!["window", "open", "--repo", "REPO", "--slots", "2"],
        Operation::CloseWindow => vec!["window", "close", window],
    };
    let repo = env.repo().display().to_string();
    let args: Vec<&str> = args
        .into_iter()
        .map(|a| if a == "REPO" { repo.as_str() } else { a })
        .collect();
    env.command(&reconcile_e2e::bin("reconcile"))
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Every failpoint once, in order; a Markdown table of the results.
fn every_failpoint() {
    println!("| failpoint | operation | after `reconcile takeover` |");
    println!("|---|---|---|");
    for (failpoint, operation) in FAILPOINTS {
        let mut env = Env::new("chaos-all");
        env.start();
        let (victim, window) = setup(&env);
        env.sigterm();
        let mut daemon = start_at(&env, failpoint);
        wait_ready_or_dead(&env, &mut daemon);
        let mut op = operate(&env, *operation, &victim, &window);
        died_at(daemon, failpoint);
        let _ = op.wait();
        let before = worktrees(&env);
        recover_and_check(&env, &before, failpoint);
        println!("| `{failpoint}` | {operation:?} | every invariant holds |");
    }
    println!("{} passed, 0 failed", FAILPOINTS.len());
}

fn main() {
    if std::env::args().any(|a| a == "--all") {
        return every_failpoint();
    }
    let seed = arg("--seed").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1
    });
    let rounds = arg("--rounds").unwrap_or(10);
    println!("chaos: seed {seed} (replay with --seed {seed}), {rounds} rounds");
    let mut rng = Rng(seed);
    for round in 1..=rounds {
        let mut env = Env::new("chaos-random");
        env.start();
        let (victim, window) = setup(&env);
        let what = if rng.below(2) == 0 {
            let (failpoint, operation) = FAILPOINTS[rng.below(FAILPOINTS.len() as u64) as usize];
            env.sigterm();
            let mut daemon = start_at(&env, failpoint);
            wait_ready_or_dead(&env, &mut daemon);
            let mut op = operate(&env, operation, &victim, &window);
            died_at(daemon, failpoint);
            let _ = op.wait();
            format!("failpoint {failpoint} during {operation:?}")
        } else {
            let operation = OPERATIONS[rng.below(OPERATIONS.len() as u64) as usize];
            let delay = Duration::from_millis(rng.below(300));
            let mut op = operate(&env, operation, &victim, &window);
            // The crash lands wherever the operation has got to after `delay`, or right after it
            // finished if it was quicker.
            reconcile_e2e::exits_within(op.id(), delay);
            env.kill9();
            let _ = op.wait();
            format!("SIGKILL {} ms into {operation:?}", delay.as_millis())
        };
        let before = worktrees(&env);
        recover_and_check(&env, &before, &what);
        println!("round {round}: {what}: invariants hold");
    }
    println!("{rounds} passed, 0 failed (seed {seed})");
}
