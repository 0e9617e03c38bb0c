//! Liveness evidence: what a row's runtime looks like in one batched probe of reality.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{OwnerMarker, ProcessIdentity, Runtime, Session, TmuxHandle};

/// What the probes prove about one row's runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The runtime we recorded is running, proven by identity or ownership marker.
    Alive,
    /// Proven gone: the server answered without it, no server runs, it belongs to an earlier
    /// boot, or what carries its name or pid now is something else.
    ConfirmedDead,
    /// The probe failed or was inconclusive. Never proof of anything.
    Unknown,
    /// Nothing was recorded to probe (a local process without a pid).
    NoHandle,
    /// Runs on another host; the local daemon never guesses its state.
    Remote,
}

impl Evidence {
    pub const ALL: [Evidence; 5] = [
        Evidence::Alive,
        Evidence::ConfirmedDead,
        Evidence::Unknown,
        Evidence::NoHandle,
        Evidence::Remote,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Alive => "alive",
            Evidence::ConfirmedDead => "confirmed_dead",
            Evidence::Unknown => "unknown",
            Evidence::NoHandle => "no_handle",
            Evidence::Remote => "remote",
        }
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `RECONCILE_OWNER` value found in a process's environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marker {
    Absent,
    /// The environment could not be read (permissions, the process exited mid-read).
    Unreadable,
    Present(String),
}

/// One tmux session as listed by the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TmuxSession {
    pub name: String,
    /// tmux's session id, such as `$3`.
    pub id: String,
    /// The session's active pane process, when its identity could be read.
    pub pane: Option<ProcessIdentity>,
    /// The ownership marker in that pane's environment.
    pub marker: Marker,
}

/// Every session on the server, from one tmux call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TmuxListing {
    /// The server process, when it could be identified.
    pub server: Option<ProcessIdentity>,
    pub sessions: Vec<TmuxSession>,
}

impl TmuxListing {
    pub fn session(&self, name: &str) -> Option<&TmuxSession> {
        self.sessions.iter().find(|s| s.name == name)
    }
}

/// The result of one batched tmux probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TmuxProbe {
    /// The server answered.
    Listing(TmuxListing),
    /// The client said unambiguously that no server runs on the socket.
    NoServer,
    /// Anything else: a timeout, a permission error, output that does not parse.
    Failed,
}

/// What `/proc` shows for a recorded pid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcessObservation {
    Absent,
    Present(ProcessIdentity),
    Unreadable,
}

/// Everything one pass observed, gathered by the adapters before any decision.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot<'a> {
    /// This boot's `/proc/sys/kernel/random/boot_id`.
    pub boot_id: &'a str,
    /// This state directory's instance id (the first half of every ownership marker).
    pub instance: &'a str,
    pub tmux: &'a TmuxProbe,
    /// Observations of the pids recorded by process-runtime rows.
    pub processes: &'a BTreeMap<u32, ProcessObservation>,
}

/// The evidence for one row's runtime in one snapshot.
pub fn evidence(session: &Session, snapshot: &Snapshot<'_>) -> Evidence {
    match &session.runtime {
        Runtime::Tmux(handle) => tmux_evidence(session, handle, snapshot),
        Runtime::Process(None) => Evidence::NoHandle,
        Runtime::Process(Some(identity)) if identity.pid == 0 => Evidence::NoHandle,
        Runtime::Process(Some(identity)) => process_evidence(identity, snapshot),
        Runtime::Remote { .. } => Evidence::Remote,
        Runtime::Unreadable(_) => Evidence::Unknown,
    }
}

fn tmux_evidence(session: &Session, handle: &TmuxHandle, snapshot: &Snapshot<'_>) -> Evidence {
    if let Some(server) = &handle.server
        && server.boot_id != snapshot.boot_id
    {
        // Created in an earlier boot: whatever holds its name now is not it.
        return Evidence::ConfirmedDead;
    }
    let listing = match snapshot.tmux {
        TmuxProbe::Failed => return Evidence::Unknown,
        TmuxProbe::NoServer => return Evidence::ConfirmedDead,
        TmuxProbe::Listing(listing) => listing,
    };
    let Some(found) = listing.session(&handle.name) else {
        return Evidence::ConfirmedDead;
    };
    if handle.is_recorded() {
        let Some(server) = &listing.server else {
            return Evidence::Unknown;
        };
        let same =
            handle.server.as_ref() == Some(server) && handle.id.as_deref() == Some(&found.id);
        return if same {
            Evidence::Alive
        } else {
            // Another session reuses the name: ours is gone, and that one is not ours.
            Evidence::ConfirmedDead
        };
    }
    // Only the name was recorded (a crash mid-create or mid-restore): the marker decides.
    let expected = OwnerMarker {
        instance: snapshot.instance.to_owned(),
        session: session.id.clone(),
    }
    .to_string();
    match &found.marker {
        Marker::Present(value) if *value == expected => Evidence::Alive,
        Marker::Present(_) | Marker::Absent => Evidence::ConfirmedDead,
        Marker::Unreadable => Evidence::Unknown,
    }
}

fn process_evidence(recorded: &ProcessIdentity, snapshot: &Snapshot<'_>) -> Evidence {
    if recorded.boot_id != snapshot.boot_id {
        return Evidence::ConfirmedDead;
    }
    match snapshot.processes.get(&recorded.pid) {
        Some(ProcessObservation::Present(seen)) if seen == recorded => Evidence::Alive,
        // The pid now belongs to another process (other start ticks or boot).
        Some(ProcessObservation::Present(_)) => Evidence::ConfirmedDead,
        Some(ProcessObservation::Absent) => Evidence::ConfirmedDead,
        Some(ProcessObservation::Unreadable) | None => Evidence::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::model::{SessionId, SessionState};

    const BOOT: &str = "boot-a";

    fn ident(pid: u32, ticks: u64) -> ProcessIdentity {
        ProcessIdentity {
            boot_id: BOOT.into(),
            pid,
            start_ticks: ticks,
        }
    }

    fn session(runtime: Runtime) -> Session {
        Session {
            id: SessionId::parse("s1").unwrap(),
            name: None,
            repo: PathBuf::from("/r"),
            branch: "b".into(),
            worktree: PathBuf::from("/w"),
            runtime,
            command: vec!["true".into()],
            resume_token: None,
            state: SessionState::Running,
            created_at_ms: 0,
            updated_at_ms: 0,
            ended_at_ms: None,
            end_reason: None,
            preserved_ref: None,
        }
    }

    fn recorded() -> TmuxHandle {
        TmuxHandle {
            name: "rc-s1".into(),
            id: Some("$3".into()),
            server: Some(ident(100, 5)),
            pane: Some(ident(101, 6)),
        }
    }

    fn listed(name: &str, id: &str, marker: Marker) -> TmuxSession {
        TmuxSession {
            name: name.into(),
            id: id.into(),
            pane: Some(ident(101, 6)),
            marker,
        }
    }

    fn listing(server: Option<ProcessIdentity>, sessions: Vec<TmuxSession>) -> TmuxProbe {
        TmuxProbe::Listing(TmuxListing { server, sessions })
    }

    fn check(runtime: Runtime, tmux: TmuxProbe, procs: &[(u32, ProcessObservation)]) -> Evidence {
        let processes = procs.iter().cloned().collect();
        let snapshot = Snapshot {
            boot_id: BOOT,
            instance: "inst",
            tmux: &tmux,
            processes: &processes,
        };
        evidence(&session(runtime), &snapshot)
    }

    #[test]
    fn tmux_cases() {
        use Evidence::*;
        let ours = || listed("rc-s1", "$3", Marker::Absent);
        let server = Some(ident(100, 5));
        let tmux = |h: TmuxHandle| Runtime::Tmux(h);
        let earlier_boot = TmuxHandle {
            server: Some(ProcessIdentity {
                boot_id: "boot-old".into(),
                ..ident(100, 5)
            }),
            ..recorded()
        };
        let intent = TmuxHandle::intent("rc-s1".into());
        #[rustfmt::skip]
        let cases: Vec<(&str, Runtime, TmuxProbe, Evidence)> = vec![
            ("same server, same id", tmux(recorded()), listing(server.clone(), vec![ours()]), Alive),
            ("absent from an answering server", tmux(recorded()), listing(server.clone(), vec![]), ConfirmedDead),
            ("no server", tmux(recorded()), TmuxProbe::NoServer, ConfirmedDead),
            ("probe failed", tmux(recorded()), TmuxProbe::Failed, Unknown),
            ("earlier boot, even if a same-named session lives", tmux(earlier_boot), listing(server.clone(), vec![ours()]), ConfirmedDead),
            ("name reused with another id", tmux(recorded()), listing(server.clone(), vec![listed("rc-s1", "$9", Marker::Absent)]), ConfirmedDead),
            ("name reused on a restarted server", tmux(recorded()), listing(Some(ident(100, 77)), vec![ours()]), ConfirmedDead),
            ("server identity unreadable", tmux(recorded()), listing(None, vec![ours()]), Unknown),
            ("intent, our marker", tmux(intent.clone()), listing(server.clone(), vec![listed("rc-s1", "$1", Marker::Present("inst/s1".into()))]), Alive),
            ("intent, other instance's marker", tmux(intent.clone()), listing(server.clone(), vec![listed("rc-s1", "$1", Marker::Present("other/s1".into()))]), ConfirmedDead),
            ("intent, no marker", tmux(intent.clone()), listing(server.clone(), vec![listed("rc-s1", "$1", Marker::Absent)]), ConfirmedDead),
            ("intent, marker unreadable", tmux(intent.clone()), listing(server.clone(), vec![listed("rc-s1", "$1", Marker::Unreadable)]), Unknown),
            ("intent, never created", tmux(intent.clone()), listing(server.clone(), vec![]), ConfirmedDead),
            ("intent, probe failed", tmux(intent), TmuxProbe::Failed, Unknown),
        ];
        for (what, runtime, probe, want) in cases {
            assert_eq!(check(runtime, probe, &[]), want, "{what}");
        }
    }

    #[test]
    fn process_cases() {
        use Evidence::*;
        use ProcessObservation as O;
        let p = |i: ProcessIdentity| Runtime::Process(Some(i));
        let other_boot = ProcessIdentity {
            boot_id: "boot-old".into(),
            ..ident(7, 70)
        };
        type Case = (&'static str, Runtime, Vec<(u32, O)>, Evidence);
        #[rustfmt::skip]
        let cases: Vec<Case> = vec![
            ("same identity", p(ident(7, 70)), vec![(7, O::Present(ident(7, 70)))], Alive),
            ("pid absent", p(ident(7, 70)), vec![(7, O::Absent)], ConfirmedDead),
            ("pid reused: other start ticks", p(ident(7, 70)), vec![(7, O::Present(ident(7, 71)))], ConfirmedDead),
            ("recorded in an earlier boot", p(other_boot), vec![(7, O::Present(ident(7, 70)))], ConfirmedDead),
            ("unreadable", p(ident(7, 70)), vec![(7, O::Unreadable)], Unknown),
            ("not observed", p(ident(7, 70)), vec![], Unknown),
            ("pid 0", p(ident(0, 0)), vec![], NoHandle),
            ("no pid recorded", Runtime::Process(None), vec![], NoHandle),
            ("remote", Runtime::Remote { host: "h".into() }, vec![], Remote),
            ("unreadable handle", Runtime::Unreadable(crate::RuntimeKind::Tmux), vec![], Unknown),
        ];
        for (what, runtime, procs, want) in cases {
            assert_eq!(check(runtime, TmuxProbe::NoServer, &procs), want, "{what}");
        }
    }
}
