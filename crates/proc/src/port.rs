//! Who holds a TCP port: the listening socket's inode from `/proc/net/tcp{,6}`, then the process
//! whose `/proc/<pid>/fd` links to that inode. No child process is started.

use std::fs;
use std::path::PathBuf;

use reconcile_core::ProcessIdentity;

use crate::identity::pids;
use crate::{Error, identity};

/// A process listening on a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortHolder {
    pub identity: ProcessIdentity,
    /// `/proc/<pid>/exe`, when readable.
    pub exe: Option<PathBuf>,
    /// The process's command name (`/proc/<pid>/comm`).
    pub program: String,
}

/// What the port lookup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    /// Nothing listens on the port.
    Nobody,
    /// One process owns the listening socket.
    Process(PortHolder),
    /// Something listens, but its owner could not be found (another user's process, a process
    /// that exited mid-scan, a socket held by several processes).
    Unknown,
}

/// Find who listens on `port` on loopback or on every address (IPv4 or IPv6).
///
/// The tables can be caught mid-change: between fork and exec a child shares its parent's
/// socket, and a socket being closed can still be listed with no process holding it. Such a look
/// is taken again, a few times, before the holder is called unidentifiable.
pub fn port_holder(boot_id: &str, port: u16) -> Result<Holder, Error> {
    let mut owners = Vec::new();
    for attempt in 0..20 {
        if attempt > 0 {
            std::thread::park_timeout(std::time::Duration::from_millis(5));
        }
        let inodes = listening(port)?;
        if inodes.is_empty() {
            return Ok(Holder::Nobody);
        }
        owners = socket_owners(&inodes)?;
        if owners.len() == 1 {
            break;
        }
    }
    let [pid] = owners[..] else {
        return Ok(Holder::Unknown);
    };
    let Some(identity) = identity(boot_id, pid)? else {
        return Ok(Holder::Unknown);
    };
    let program = fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_owned())
        .unwrap_or_default();
    let exe = fs::read_link(format!("/proc/{pid}/exe")).ok();
    Ok(Holder::Process(PortHolder {
        identity,
        exe,
        program,
    }))
}

/// Inodes of the sockets listening on `port` on loopback or on every address.
fn listening(port: u16) -> Result<Vec<u64>, Error> {
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match fs::read_to_string(table) {
            Ok(text) => text,
            // No IPv6 on this kernel.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(source) => {
                return Err(Error::Read {
                    path: table.into(),
                    source,
                });
            }
        };
        inodes.extend(listening_inodes(&text, port));
    }
    Ok(inodes)
}

/// The processes with a descriptor on any of the socket `inodes`.
fn socket_owners(inodes: &[u64]) -> Result<Vec<u32>, Error> {
    let mut owners = Vec::new();
    for pid in pids()? {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            fs::read_link(fd.path()).is_ok_and(|target| {
                let target = target.to_string_lossy();
                inodes
                    .iter()
                    .any(|inode| target == format!("socket:[{inode}]"))
            })
        });
        if holds {
            owners.push(pid);
        }
    }
    Ok(owners)
}

/// Inodes of sockets in state LISTEN (0A) on `port`, local address loopback or any.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    let want = format!("{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (addr, local_port) = f.get(1)?.split_once(':')?;
            let listening = *f.get(3)? == "0A";
            let local = matches!(
                addr,
                "0100007F"
                    | "00000000"
                    | "00000000000000000000000000000000"
                    | "00000000000000000000000001000000"
                    | "0000000000000000FFFF00000100007F"
            );
            (listening && local && local_port == want).then(|| f.get(9)?.parse().ok())?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn parses_the_tcp_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:BAB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0
   1: 0100007F:BAB8 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 999 1 0
   2: 0A00020F:BAB8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0
";
        assert_eq!(listening_inodes(table, 47800), vec![12345]);
        assert_eq!(listening_inodes(table, 47801), Vec::<u64>::new());
    }

    #[test]
    fn finds_this_process_listening() {
        let boot = crate::boot_id().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let Holder::Process(holder) = port_holder(&boot, port).unwrap() else {
            panic!("expected this process");
        };
        assert_eq!(holder.identity.pid, std::process::id());
        assert!(holder.exe.is_some());
        drop(listener);
        assert_eq!(port_holder(&boot, port).unwrap(), Holder::Nobody);
    }
}
