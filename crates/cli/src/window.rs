//! `reconcile window`: open a window with a warm pool, list windows, close one.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::bail;
use reconcile_api::{OpenWindow, WindowView};

use crate::commands::{client, explain};

/// An absolute path for the daemon, which runs elsewhere.
pub fn absolute(path: &str) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| {
        std::env::current_dir().map_or_else(|_| PathBuf::from(path), |cwd| cwd.join(path))
    })
}

pub fn open(
    repo: &str,
    slots: u32,
    name: Option<String>,
    wait: bool,
    timeout: Duration,
) -> anyhow::Result<()> {
    let client = client()?;
    let window = client
        .open_window(&OpenWindow {
            repo: absolute(repo).display().to_string(),
            slots,
            name,
        })
        .map_err(explain)?;
    if wait {
        let deadline = Instant::now() + timeout;
        loop {
            let now = client.window(&window.id).map_err(explain)?;
            let free = now.free();
            if free >= now.target as usize {
                eprintln!("window {}: {free}/{} slots ready", now.id, now.target);
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "window {} has {free} of {} slots ready after {} s; it keeps provisioning in the background (see the daemon's log)",
                    now.id,
                    now.target,
                    timeout.as_secs()
                );
            }
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }
    println!("{}", window.id);
    Ok(())
}

pub fn ls(json: bool) -> anyhow::Result<()> {
    let windows = client()?.windows().map_err(explain)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&windows)?);
        return Ok(());
    }
    if windows.is_empty() {
        println!("no windows");
        return Ok(());
    }
    println!(
        "{:<12} {:<8} {:>5} {:>6} {:>5} {:>5}  {:<16} REPO",
        "ID", "STATE", "FREE", "LEASED", "USED", "MAKING", "NAME"
    );
    for w in &windows {
        let count = |state| w.slots.iter().filter(|s| s.state == state).count();
        println!(
            "{:<12} {:<8} {:>5} {:>6} {:>5} {:>5}  {:<16} {}",
            w.id,
            w.state.as_str(),
            format!("{}/{}", count(reconcile_core::SlotState::Free), w.target),
            count(reconcile_core::SlotState::Leased),
            count(reconcile_core::SlotState::Used),
            w.provisioning,
            w.name.as_deref().unwrap_or("-"),
            w.repo
        );
    }
    Ok(())
}

pub fn close(id: &str) -> anyhow::Result<()> {
    let window: WindowView = client()?.close_window(id).map_err(explain)?;
    let holding = window.slots.len();
    if holding == 0 {
        println!("window {} {}", window.id, window.state.as_str());
    } else {
        println!(
            "window {} closing; {holding} slot(s) hold a running session's work and stay until it ends",
            window.id
        );
    }
    Ok(())
}
