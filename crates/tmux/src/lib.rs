//! The tmux runtime: every session on one private server (`tmux -L <socket>`), created with its
//! ownership marker and resume token in its environment, probed all at once in one tmux call,
//! destroyed by its tmux id.
//!
//! The resume token reaches tmux through the client's environment (copied into the session by
//! `update-environment`), never through argv, and is removed from the server's global
//! environment in the same call. The server itself is started by a clean client and stays up
//! when its last session ends, so its own environment never holds a marker or a token.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use reconcile_core::{
    OwnerMarker, ProcessIdentity, Secret, TmuxHandle, TmuxListing, TmuxProbe, TmuxSession,
};
use reconcile_proc::ChildCount;

/// The resume token's variable in a session's environment.
pub const RESUME_TOKEN_VAR: &str = "RECONCILE_RESUME_TOKEN";

/// tmux's default `update-environment` list, plus the two variables each session gets.
const UPDATE_ENVIRONMENT: &str = "DISPLAY KRB5CCNAME SSH_ASKPASS SSH_AUTH_SOCK SSH_AGENT_PID \
    SSH_CONNECTION WINDOWID XAUTHORITY RECONCILE_OWNER RECONCILE_RESUME_TOKEN";

const MISMATCH: &str = "reconcile-mismatch";

const LIST_FORMAT: &str = "#{pid}\t#{session_id}\t#{pane_pid}\t#{session_name}";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Run(#[from] reconcile_proc::Error),
    #[error("tmux refused to {action}: {message}")]
    Refused {
        action: &'static str,
        message: String,
    },
    #[error("a tmux session named {name} already exists")]
    DuplicateSession { name: String },
    #[error(
        "session {name} has no recorded tmux id and server; it is not destroyed on its name alone"
    )]
    Unrecorded { name: String },
    #[error("tmux printed output this build does not understand while trying to {action}")]
    Unparsable { action: &'static str },
}

/// What `destroy` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destroyed {
    Destroyed,
    /// Already gone: the server answered without it, or no server runs.
    NotFound,
}

/// A session to create.
#[derive(Debug)]
pub struct Create<'a> {
    pub name: &'a str,
    pub dir: &'a Path,
    pub command: &'a [String],
    pub marker: &'a OwnerMarker,
    pub resume_token: Option<&'a Secret>,
}

/// One private tmux server.
#[derive(Clone, Debug)]
pub struct Tmux {
    socket: String,
    boot_id: String,
    timeout: Duration,
    children: ChildCount,
}

impl Tmux {
    pub fn new(
        socket: impl Into<String>,
        boot_id: impl Into<String>,
        children: ChildCount,
    ) -> Tmux {
        Tmux {
            socket: socket.into(),
            boot_id: boot_id.into(),
            timeout: Duration::from_secs(10),
            children,
        }
    }

    /// How long one tmux call may take before it counts as unanswered.
    pub fn with_timeout(mut self, timeout: Duration) -> Tmux {
        self.timeout = timeout;
        self
    }

    pub fn socket(&self) -> &str {
        &self.socket
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket, "-f", "/dev/null"])
            .env_remove("TMUX")
            .env_remove(OwnerMarker::VAR)
            .env_remove(RESUME_TOKEN_VAR);
        c
    }

    fn run(&self, mut command: Command) -> Result<Output, Error> {
        Ok(reconcile_proc::run(
            &mut command,
            self.timeout,
            &self.children,
        )?)
    }

    /// Every session on the server, in one tmux call plus reads of `/proc`.
    pub fn probe(&self) -> TmuxProbe {
        let mut c = self.command();
        c.args(["list-sessions", "-F", LIST_FORMAT]);
        let output = match self.run(c) {
            Ok(output) => output,
            Err(e) => {
                tracing::warn!(socket = %self.socket, error = %e, "tmux probe did not answer");
                return TmuxProbe::Failed;
            }
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if says_no_server(&stderr) {
                return TmuxProbe::NoServer;
            }
            tracing::warn!(socket = %self.socket, stderr = %stderr.trim(), "tmux probe failed");
            return TmuxProbe::Failed;
        }
        match parse_listing(&String::from_utf8_lossy(&output.stdout)) {
            Some(rows) => TmuxProbe::Listing(self.listing(rows)),
            None => {
                tracing::warn!(socket = %self.socket, "tmux probe printed unparsable output");
                TmuxProbe::Failed
            }
        }
    }

    fn listing(&self, rows: Vec<PaneRow>) -> TmuxListing {
        let server = rows.first().and_then(|r| self.identity(r.server_pid));
        let mut sessions: Vec<TmuxSession> = Vec::new();
        for row in rows {
            // One row per session; a repeated id would be a server answering oddly.
            if sessions.iter().any(|s| s.id == row.session_id) {
                continue;
            }
            sessions.push(TmuxSession {
                pane: self.identity(row.pane_pid),
                marker: reconcile_proc::owner_marker(row.pane_pid),
                name: row.name,
                id: row.session_id,
            });
        }
        TmuxListing { server, sessions }
    }

    fn identity(&self, pid: u32) -> Option<ProcessIdentity> {
        reconcile_proc::identity(&self.boot_id, pid).ok().flatten()
    }

    /// Create a detached session running `command` in `dir`, with the ownership marker and the
    /// resume token in its environment. One tmux call.
    pub fn create(&self, spec: &Create<'_>) -> Result<TmuxHandle, Error> {
        self.start_server()?;
        let mut c = self.command();
        c.env(OwnerMarker::VAR, spec.marker.to_string());
        if let Some(token) = spec.resume_token {
            c.env(RESUME_TOKEN_VAR, token.expose());
        }
        c.args([
            "set-option",
            "-g",
            "update-environment",
            UPDATE_ENVIRONMENT,
            ";",
        ])
        .args([
            "new-session",
            "-d",
            "-P",
            "-F",
            "#{pid}\t#{session_id}\t#{pane_pid}",
        ])
        .args(["-s", spec.name, "-c"])
        .arg(spec.dir)
        .arg("--")
        .args(spec.command)
        .args([";", "set-environment", "-g", "-u", OwnerMarker::VAR])
        .args([";", "set-environment", "-g", "-u", RESUME_TOKEN_VAR]);
        let output = self.run(c)?;
        if !output.status.success() {
            let message = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            if message.starts_with("duplicate session") {
                return Err(Error::DuplicateSession {
                    name: spec.name.to_owned(),
                });
            }
            return Err(Error::Refused {
                action: "create a session",
                message,
            });
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut fields = stdout.trim().split('\t');
        let unparsable = || Error::Unparsable {
            action: "create a session",
        };
        let server_pid: u32 = fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(unparsable)?;
        let id = fields
            .next()
            .filter(|f| f.starts_with('$'))
            .ok_or_else(unparsable)?;
        let pane_pid: u32 = fields
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(unparsable)?;
        Ok(TmuxHandle {
            name: spec.name.to_owned(),
            id: Some(id.to_owned()),
            server: self.identity(server_pid),
            pane: self.identity(pane_pid),
        })
    }

    /// Start the server from a client whose environment holds no marker and no token, and keep
    /// it running when its last session ends. A server started by a create's client would keep
    /// that session's marker and token in its own environment for its whole life, where an
    /// orphan scan would take the server for that session's process.
    fn start_server(&self) -> Result<(), Error> {
        let mut c = self.command();
        c.args(["start-server", ";", "set-option", "-s", "exit-empty", "off"]);
        let output = self.run(c)?;
        if output.status.success() {
            Ok(())
        } else {
            Err(Error::Refused {
                action: "start the server",
                message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            })
        }
    }

    /// Destroy the session the handle records, and nothing else: the kill runs inside the
    /// server only if that server's pid and the session's name still match the handle, checked
    /// atomically by tmux itself. Already gone is not an error.
    pub fn destroy(&self, handle: &TmuxHandle) -> Result<Destroyed, Error> {
        let (Some(id), Some(server)) = (&handle.id, &handle.server) else {
            return Err(Error::Unrecorded {
                name: handle.name.clone(),
            });
        };
        // The server we recorded is gone (or its pid now names another process): so is the session.
        if self.identity(server.pid).as_ref() != Some(server) {
            return Ok(Destroyed::NotFound);
        }
        let condition = format!(
            "#{{&&:#{{==:#{{pid}},{}}},#{{==:#{{session_name}},{}}}}}",
            server.pid, handle.name
        );
        let mut c = self.command();
        c.args(["if-shell", "-F", "-t", id, &condition])
            .arg(format!("kill-session -t '{id}'"))
            .arg(format!("display-message -p {MISMATCH}"));
        let output = self.run(c)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            if String::from_utf8_lossy(&output.stdout).trim() == MISMATCH {
                // The id names another session now: ours is gone.
                return Ok(Destroyed::NotFound);
            }
            return Ok(Destroyed::Destroyed);
        }
        if says_no_server(&stderr) || stderr.contains("can't find session") {
            return Ok(Destroyed::NotFound);
        }
        Err(Error::Refused {
            action: "destroy a session",
            message: stderr.trim().to_owned(),
        })
    }

    /// Stop the whole server and every session on it. For tests and explicit teardown only.
    pub fn kill_server(&self) -> Result<(), Error> {
        let mut c = self.command();
        c.arg("kill-server");
        let output = self.run(c)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if output.status.success() || says_no_server(&stderr) {
            Ok(())
        } else {
            Err(Error::Refused {
                action: "stop the server",
                message: stderr.trim().to_owned(),
            })
        }
    }
}

/// Whether tmux said unambiguously that no server runs on the socket.
fn says_no_server(stderr: &str) -> bool {
    stderr.starts_with("no server running on")
        || (stderr.starts_with("error connecting to")
            && stderr.contains("(No such file or directory)"))
}

#[derive(Debug, PartialEq)]
struct PaneRow {
    server_pid: u32,
    session_id: String,
    pane_pid: u32,
    name: String,
}

fn parse_listing(stdout: &str) -> Option<Vec<PaneRow>> {
    stdout
        .lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let mut f = line.splitn(4, '\t');
            let server_pid = f.next()?.parse().ok()?;
            let session_id = f.next().filter(|s| s.starts_with('$'))?.to_owned();
            let pane_pid = f.next()?.parse().ok()?;
            let name = f.next()?.to_owned();
            Some(PaneRow {
                server_pid,
                session_id,
                pane_pid,
                name,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listings() {
        let rows =
            parse_listing("10\t$0\t11\trc-a\n10\t$0\t12\trc-a\n10\t$1\t13\tname\twith tab\n")
                .unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2].name, "name\twith tab");
        assert_eq!(parse_listing("").unwrap(), vec![]);
        assert!(parse_listing("garbage\n").is_none());
        assert!(parse_listing("10\t0\t11\tx\n").is_none());
    }

    #[test]
    fn recognises_no_server() {
        assert!(says_no_server("no server running on /tmp/tmux-0/x\n"));
        assert!(says_no_server(
            "error connecting to /tmp/tmux-0/x (No such file or directory)\n"
        ));
        assert!(!says_no_server(
            "error connecting to /tmp/tmux-0/x (Permission denied)\n"
        ));
        assert!(!says_no_server(
            "directory /tmp/tmux-0 has unsafe permissions\n"
        ));
    }
}
