//! The commands: each finds the daemon, makes its requests, prints for a person or as JSON.

use std::io::Read;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use reconcile_api::{Client, ClientError, CreateSession, SessionView};
use reconcile_core::SessionState;
use reconcile_home::Home;

const START_HINT: &str = "start one with `reconcile takeover`";

pub fn client() -> anyhow::Result<Client> {
    let home = Home::from_env()?;
    match Client::from_home(&home) {
        Ok(client) => Ok(client),
        Err(e @ ClientError::NoDaemon { .. }) => bail!("{e}; {START_HINT}"),
        Err(e) => Err(e.into()),
    }
}

/// Turn "cannot connect" into advice.
pub fn explain(e: ClientError) -> anyhow::Error {
    match e {
        ClientError::Unreachable { port, .. } => {
            anyhow::anyhow!(
                "no daemon answers on port {port} (its run-file is stale); {START_HINT}"
            )
        }
        other => other.into(),
    }
}

pub fn session_new(
    repo: Option<String>,
    name: Option<String>,
    window: Option<String>,
    resume_token: Option<String>,
    command: Vec<String>,
) -> anyhow::Result<()> {
    let resume_token = match resume_token.as_deref() {
        Some("-") => {
            let mut token = String::new();
            std::io::stdin()
                .read_to_string(&mut token)
                .context("cannot read the resume token from stdin")?;
            let token = token.trim_end_matches(['\n', '\r']).to_owned();
            if token.is_empty() {
                bail!("--resume-token - read an empty token from stdin");
            }
            Some(token)
        }
        _ => resume_token,
    };
    let repo = match (&repo, &window) {
        (Some(repo), _) => crate::window::absolute(repo).display().to_string(),
        (None, Some(_)) => String::new(),
        (None, None) => bail!("give --repo PATH (or --window ID to take a warm slot)"),
    };
    let view = client()?
        .create(&CreateSession {
            repo,
            name,
            command,
            resume_token,
            window,
        })
        .map_err(explain)?;
    println!("{}", view.id);
    Ok(())
}

pub fn session_ls(json: bool) -> anyhow::Result<()> {
    let sessions = client()?.sessions().map_err(explain)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&sessions)?);
        return Ok(());
    }
    if sessions.is_empty() {
        println!("no sessions");
        return Ok(());
    }
    println!(
        "{:<12} {:<11} {:>6}  {:<16} WORKTREE",
        "ID", "STATE", "AGE", "NAME"
    );
    let now = now_ms();
    for s in &sessions {
        println!(
            "{:<12} {:<11} {:>6}  {:<16} {}",
            s.id,
            s.state.as_str(),
            age(now - s.created_at_ms),
            s.name.as_deref().unwrap_or("-"),
            s.worktree
        );
    }
    Ok(())
}

pub fn session_stop(id: &str) -> anyhow::Result<()> {
    let view = client()?.stop(id).map_err(explain)?;
    match &view.preserved_ref {
        Some(r) => println!("{} terminated; uncommitted work kept at {r}", view.id),
        None => println!("{} terminated; nothing uncommitted to keep", view.id),
    }
    Ok(())
}

pub fn report(json: bool) -> anyhow::Result<()> {
    let report = client()?.report().map_err(explain)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("last reconcile: {}", report.kind);
        print!("{}", report.report);
    }
    Ok(())
}

pub fn daemon_stop(stop_sessions: bool) -> anyhow::Result<()> {
    let client = client()?;
    let pid = client.health().map_err(explain)?.pid;
    client.stop_daemon(stop_sessions).map_err(explain)?;
    // Wait until it has let go of its port, so a new daemon can start right away.
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.health().is_ok() {
        if Instant::now() > deadline {
            bail!("the daemon (pid {pid}) accepted the stop but still answers after 30 s");
        }
        std::thread::park_timeout(Duration::from_millis(50));
    }
    if stop_sessions {
        println!(
            "daemon (pid {pid}) stopped; its sessions were saved and will be restored at the next start"
        );
    } else {
        println!(
            "daemon (pid {pid}) stopped; sessions keep running and will be adopted at the next start"
        );
    }
    Ok(())
}

pub fn status(json: bool) -> anyhow::Result<()> {
    let client = client()?;
    let health = client.health().map_err(explain)?;
    let ready = client.ready().map_err(explain)?;
    let sessions: Vec<SessionView> = client.sessions().map_err(explain)?;
    let running = sessions
        .iter()
        .filter(|s| s.state == SessionState::Running)
        .count();
    if json {
        let status = serde_json::json!({
            "pid": health.pid,
            "port": client.port(),
            "version": health.version,
            "instance_id": health.instance_id,
            "ready": ready,
            "sessions": sessions.len(),
            "running": running,
        });
        println!("{}", serde_json::to_string_pretty(&status)?);
    } else {
        println!(
            "daemon pid {} on port {}, version {}, {}; {running} of {} sessions running",
            health.pid,
            client.port(),
            health.version,
            if ready { "ready" } else { "reconciling" },
            sessions.len()
        );
    }
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

fn takeover_config() -> anyhow::Result<reconcile_takeover::Config> {
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    Ok(reconcile_takeover::Config::from_env(&exe)?)
}

pub fn takeover(json: bool, restart: bool) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    reconcile_takeover::headless(&exe, json, restart)?;
    Ok(())
}

pub fn supervise() -> anyhow::Result<()> {
    use reconcile_takeover::Supervised;
    let config = takeover_config()?;
    reconcile_takeover::supervise(&config, &|| false, &mut |event| match event {
        Supervised::Running { pid } => eprintln!("supervise: daemon {pid} running"),
        Supervised::Exited {
            pid,
            unexpected: true,
        } => eprintln!("supervise: daemon {pid} exited unexpectedly"),
        Supervised::Exited {
            pid,
            unexpected: false,
        } => eprintln!("supervise: daemon {pid} stopped on request"),
        Supervised::Failed { message } => eprintln!("supervise: {message}"),
        Supervised::Restarting { in_ms } => eprintln!("supervise: restarting in {in_ms} ms"),
        Supervised::CrashLoop { .. } => eprintln!("supervise: crash loop"),
    })?;
    Ok(())
}
