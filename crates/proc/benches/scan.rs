//! Benchmark: the orphan scan (one pass over `/proc` reading each process's marker) over a table
//! of at least 5,000 processes this bench starts itself, against `ps -eo pid,lstart,args` over
//! the same table in the same run. Reports time per 1,000 processes and the processes each
//! method started (from the kernel's fork counter in `/proc/stat`, so other activity on the
//! machine shows up in both).
//!
//! Run: `cargo bench -p reconcile-proc --bench scan` (or `scripts/bench`).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PROCESSES: usize = 5_000;
const ROUNDS: u32 = 5;

/// Processes forked since boot, system-wide.
fn forks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    stat.lines()
        .find_map(|l| l.strip_prefix("processes "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn measure(mut f: impl FnMut() -> usize) -> (Duration, u64, usize) {
    let forks_before = forks();
    let started = Instant::now();
    let mut seen = 0;
    for _ in 0..ROUNDS {
        seen = f();
    }
    (
        started.elapsed() / ROUNDS,
        (forks() - forks_before) / u64::from(ROUNDS),
        seen,
    )
}

fn main() {
    let boot = reconcile_proc::boot_id().unwrap();
    let mut table: Vec<Child> = (0..PROCESSES)
        .map(|i| {
            let mut c = Command::new("sleep");
            c.arg("3600")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // Half carry a marker, as a busy workstation's agents would.
            if i % 2 == 0 {
                c.env("RECONCILE_OWNER", format!("benchinstance/s-{i}"));
            }
            c.spawn().unwrap()
        })
        .collect();

    let (ours, our_forks, marked) =
        measure(|| reconcile_proc::scan_markers(&boot).unwrap().marked.len());
    let (ps, ps_forks, lines) = measure(|| {
        let out = Command::new("ps")
            .args(["-eo", "pid,lstart,args"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    });
    for child in &mut table {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert!(
        marked >= PROCESSES / 2,
        "the scan found {marked} marked processes"
    );
    let per_thousand = |d: Duration, n: usize| d.as_secs_f64() * 1e3 / (n as f64 / 1000.0);

    println!(
        "orphan scan bench: {lines} processes in the table ({PROCESSES} started by the bench, half marked)"
    );
    println!("| method | one pass | per 1,000 processes | processes started per pass |");
    println!("|---|---:|---:|---:|");
    println!(
        "| marker scan (`/proc/<pid>/environ` + `stat`) | {:.1} ms | {:.2} ms | {our_forks} |",
        ours.as_secs_f64() * 1e3,
        per_thousand(ours, lines)
    );
    println!(
        "| `ps -eo pid,lstart,args` (no environment, so no ownership) | {:.1} ms | {:.2} ms | {ps_forks} |",
        ps.as_secs_f64() * 1e3,
        per_thousand(ps, lines)
    );
    println!(
        "ratio: the scan takes {:.2}x the time of ps",
        ours.as_secs_f64() / ps.as_secs_f64()
    );
}
