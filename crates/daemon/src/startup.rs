//! Start-up: the single-instance lock, our own session and process group, the port, the run-file.

use std::fs::{File, TryLockError};
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use anyhow::{Context, bail};
use reconcile_api::{RunFile, read_run_file, write_run_file};
use reconcile_home::Home;
use reconcile_proc::{Holder, port_holder};
use rustix::process::{getpgrp, getpid, setsid};

/// Close every descriptor above stderr that this process inherited, so a launcher's pipes and
/// files never stay open in the daemon. Call first thing in `main`.
#[allow(unsafe_code)]
pub fn close_inherited_descriptors() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    // The listing's own descriptor links to this very directory; it is closed with `entries`.
    let listing = std::fs::canonicalize("/proc/self/fd").ok();
    let inherited: Vec<i32> = entries
        .flatten()
        .filter(|e| std::fs::read_link(e.path()).ok() != listing)
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in inherited {
        // SAFETY: this runs before the daemon opens any descriptor of its own, so nothing in
        // this process owns a descriptor above 2 (the listing's own was filtered out above and
        // is closed by now): each one is inherited and open, and closing it frees nothing of ours.
        unsafe { rustix::io::close(fd) };
    }
}

/// The lock that makes this daemon the only one for its state directory. Held until dropped;
/// the descriptor is close-on-exec, so no child inherits it.
#[derive(Debug)]
pub struct InstanceLock {
    _file: File,
}

pub fn lock(home: &Home) -> anyhow::Result<InstanceLock> {
    let path = home.daemon_lock();
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(InstanceLock { _file: file }),
        Err(TryLockError::WouldBlock) => {
            let holder = read_run_file(&home.run_file())
                .map(|run| format!(" (pid {}, port {})", run.pid, run.port))
                .unwrap_or_default();
            bail!(
                "another reconciled already serves {}{holder}; stop it with `reconcile daemon stop`, \
                 or use another RECONCILE_HOME",
                home.root().display()
            )
        }
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

/// Become the leader of a new session and process group (pgid == pid). Already a process-group
/// leader (started from a shell), we cannot start a session, but pgid == pid holds.
pub fn own_process_group() -> anyhow::Result<()> {
    if setsid().is_err() && getpgrp() != getpid() {
        bail!("cannot become a process group leader");
    }
    Ok(())
}

/// Bind 127.0.0.1:port. A taken port names its holder when it can be found.
pub fn bind(port: u16, boot_id: &str) -> anyhow::Result<TcpListener> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    match TcpListener::bind(addr) {
        Ok(listener) => Ok(listener),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            let who = match port_holder(boot_id, port) {
                Ok(Holder::Process(h)) => {
                    let exe = h
                        .exe
                        .map(|p| format!(" ({})", p.display()))
                        .unwrap_or_default();
                    format!("process {} `{}`{exe}", h.identity.pid, h.program)
                }
                _ => "a process this user cannot identify".to_owned(),
            };
            bail!(
                "port {port} on 127.0.0.1 is taken by {who}; stop it or set RECONCILE_PORT to a free port"
            )
        }
        Err(e) => Err(e).with_context(|| format!("cannot listen on {addr}")),
    }
}

/// A fresh bearer token: 32 random bytes, hex.
pub fn new_token() -> anyhow::Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).context("cannot create a bearer token")?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Write the run-file naming this process.
pub fn write_run(home: &Home, run: &RunFile) -> anyhow::Result<()> {
    write_run_file(&home.run_file(), run).context("cannot write the run-file")
}
