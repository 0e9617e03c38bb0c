//! `plan_daemon_takeover`: from what a launcher observed about the daemon of a state directory,
//! what to do so that exactly one healthy, ready daemon of ours serves it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::ProcessIdentity;

/// The run-file as the launcher found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunFileSeen {
    Absent,
    /// Corrupt, truncated, empty, huge, not JSON, a symlink, loose permissions: treated as
    /// absent, and never followed to signal anyone.
    Invalid,
    Valid(RunFacts),
}

/// The identity a valid run-file claims for the daemon.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFacts {
    pub daemon: ProcessIdentity,
    pub port: u16,
    pub version: String,
}

/// What `/healthz` answered within its deadline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthSeen {
    NoAnswer,
    Answered { pid: u32, version: String },
}

/// What `/readyz` answered within its deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadySeen {
    Ready,
    Reconciling,
    NoAnswer,
}

/// Who listens on the port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSeen {
    Free,
    Held {
        holder: ProcessIdentity,
        program: String,
    },
    /// Something listens but its process cannot be identified.
    Unknown,
}

/// Everything one look found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakeoverSeen {
    pub run_file: RunFileSeen,
    pub health: HealthSeen,
    pub ready: ReadySeen,
    pub port: PortSeen,
    /// This build's version.
    pub version: String,
    /// How long this takeover has already waited for the daemon to become ready, and how long
    /// it may.
    pub waited_ms: u64,
    pub ready_deadline_ms: u64,
    /// A graceful restart was asked for ("restart daemon"): replace our daemon even if healthy.
    pub restart: bool,
    /// The pid holding the state directory's daemon lock: a daemon that is starting (or runs).
    /// Only `reconciled` takes that lock, so a holder that has not bound the port or written
    /// the run-file yet is a daemon in start-up, and spawning another would only fail.
    pub lock_holder: Option<u32>,
}

/// Why a verified daemon of ours is replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplaceBecause {
    /// It holds the port but `/healthz` does not answer (stopped, deadlocked).
    NotAnswering,
    /// It answers with another version than this build.
    OtherVersion,
    /// It answers but did not become ready within the deadline.
    NotReadyInTime,
    /// A restart was asked for.
    Requested,
}

/// Why the launcher refuses to act.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefuseBecause {
    /// A process that is not our daemon holds the port.
    ForeignHolder { pid: u32, program: String },
    /// A process holds the daemon lock but never became a daemon that answers in time.
    StuckStarting { pid: u32 },
    /// Something holds the port and cannot be identified.
    UnknownHolder,
}

impl fmt::Display for RefuseBecause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefuseBecause::ForeignHolder { pid, program } => write!(
                f,
                "the port is held by process {pid} ({program}), which is not this state directory's daemon; it was left alone"
            ),
            RefuseBecause::StuckStarting { pid } => write!(
                f,
                "process {pid} holds this state directory's daemon lock but has not started serving; it was left alone (look at it, or at the daemon's log)"
            ),
            RefuseBecause::UnknownHolder => f.write_str(
                "the port is held by a process that cannot be identified (another user's?); nothing was signalled",
            ),
        }
    }
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TakeoverPlan {
    /// A healthy, ready daemon of ours: use it.
    Reuse {
        pid: u32,
    },
    /// Ours and healthy, still reconciling: look again shortly.
    WaitForReady {
        pid: u32,
    },
    /// A daemon holds the lock and is still starting (not yet bound, or no run-file yet): look
    /// again shortly.
    WaitForStart {
        pid: u32,
    },
    /// Ours (identity verified against the run-file) and wedged: stop it, then spawn.
    Replace {
        daemon: ProcessIdentity,
        because: ReplaceBecause,
    },
    /// Nothing holds the port: start a daemon, first removing a run-file that names a dead or
    /// unrelated process (nobody is signalled).
    Spawn {
        remove_run_file: bool,
    },
    Refuse(RefuseBecause),
}

/// Decide. Only a port holder whose identity (boot id, pid, start ticks) equals the run-file's
/// daemon is ever replaced; anything else holding the port is refused, never signalled.
pub fn plan_daemon_takeover(seen: &TakeoverSeen) -> TakeoverPlan {
    let starting = |pid: u32| {
        if seen.waited_ms < seen.ready_deadline_ms {
            TakeoverPlan::WaitForStart { pid }
        } else {
            TakeoverPlan::Refuse(RefuseBecause::StuckStarting { pid })
        }
    };
    let (holder, program) = match &seen.port {
        PortSeen::Free => {
            if let Some(pid) = seen.lock_holder {
                return starting(pid);
            }
            return TakeoverPlan::Spawn {
                remove_run_file: matches!(seen.run_file, RunFileSeen::Valid(_)),
            };
        }
        PortSeen::Unknown => return TakeoverPlan::Refuse(RefuseBecause::UnknownHolder),
        PortSeen::Held { holder, program } => (holder, program),
    };
    let ours = matches!(&seen.run_file, RunFileSeen::Valid(run) if run.daemon == *holder);
    if !ours && seen.lock_holder == Some(holder.pid) {
        // Bound, but its run-file is not written yet: a daemon of ours in start-up.
        return starting(holder.pid);
    }
    if !ours {
        return TakeoverPlan::Refuse(RefuseBecause::ForeignHolder {
            pid: holder.pid,
            program: program.clone(),
        });
    }
    let replace = |because| TakeoverPlan::Replace {
        daemon: holder.clone(),
        because,
    };
    if seen.restart {
        return replace(ReplaceBecause::Requested);
    }
    match &seen.health {
        HealthSeen::Answered { pid, version } if *pid == holder.pid => {
            if *version != seen.version {
                return replace(ReplaceBecause::OtherVersion);
            }
            match seen.ready {
                ReadySeen::Ready => TakeoverPlan::Reuse { pid: *pid },
                ReadySeen::Reconciling | ReadySeen::NoAnswer
                    if seen.waited_ms < seen.ready_deadline_ms =>
                {
                    TakeoverPlan::WaitForReady { pid: *pid }
                }
                ReadySeen::Reconciling | ReadySeen::NoAnswer => {
                    replace(ReplaceBecause::NotReadyInTime)
                }
            }
        }
        // No answer, or an answer from another pid than the one holding the port.
        HealthSeen::Answered { .. } | HealthSeen::NoAnswer => replace(ReplaceBecause::NotAnswering),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: &str = "1.0.0";

    fn ident(pid: u32, ticks: u64, boot: &str) -> ProcessIdentity {
        ProcessIdentity {
            boot_id: boot.into(),
            pid,
            start_ticks: ticks,
        }
    }

    fn daemon() -> ProcessIdentity {
        ident(100, 5000, "boot")
    }

    fn run(daemon: ProcessIdentity) -> RunFileSeen {
        RunFileSeen::Valid(RunFacts {
            daemon,
            port: 47800,
            version: V.into(),
        })
    }

    fn held(holder: ProcessIdentity, program: &str) -> PortSeen {
        PortSeen::Held {
            holder,
            program: program.into(),
        }
    }

    fn healthy(pid: u32, version: &str) -> HealthSeen {
        HealthSeen::Answered {
            pid,
            version: version.into(),
        }
    }

    fn seen(
        run_file: RunFileSeen,
        health: HealthSeen,
        ready: ReadySeen,
        port: PortSeen,
        waited_ms: u64,
    ) -> TakeoverSeen {
        TakeoverSeen {
            run_file,
            health,
            ready,
            port,
            version: V.into(),
            waited_ms,
            ready_deadline_ms: 30_000,
            restart: false,
            lock_holder: None,
        }
    }

    #[test]
    fn every_case() {
        use ReadySeen::*;
        use TakeoverPlan::*;
        let replace = |because| Replace {
            daemon: daemon(),
            because,
        };
        let foreign = |pid: u32, program: &str| {
            Refuse(RefuseBecause::ForeignHolder {
                pid,
                program: program.into(),
            })
        };
        #[rustfmt::skip]
        let cases: Vec<(&str, TakeoverSeen, TakeoverPlan)> = vec![
            ("healthy, ready, holder matches the run-file",
                seen(run(daemon()), healthy(100, V), Ready, held(daemon(), "reconciled"), 0), Reuse { pid: 100 }),
            ("healthy, still reconciling, within the deadline",
                seen(run(daemon()), healthy(100, V), Reconciling, held(daemon(), "reconciled"), 1_000), WaitForReady { pid: 100 }),
            ("healthy, still reconciling, past the deadline",
                seen(run(daemon()), healthy(100, V), Reconciling, held(daemon(), "reconciled"), 30_000), replace(ReplaceBecause::NotReadyInTime)),
            ("readyz silent, within the deadline",
                seen(run(daemon()), healthy(100, V), NoAnswer, held(daemon(), "reconciled"), 0), WaitForReady { pid: 100 }),
            ("answers with another version",
                seen(run(daemon()), healthy(100, "0.9.0"), Ready, held(daemon(), "reconciled"), 0), replace(ReplaceBecause::OtherVersion)),
            ("ours, verified, not answering (stopped, deadlocked)",
                seen(run(daemon()), HealthSeen::NoAnswer, NoAnswer, held(daemon(), "reconciled"), 0), replace(ReplaceBecause::NotAnswering)),
            ("ours, verified, another pid answers",
                seen(run(daemon()), healthy(999, V), Ready, held(daemon(), "reconciled"), 0), replace(ReplaceBecause::NotAnswering)),
            ("a foreign process holds the port",
                seen(run(daemon()), HealthSeen::NoAnswer, NoAnswer, held(ident(7, 1, "boot"), "python3"), 0), foreign(7, "python3")),
            ("a foreign process holds the port and answers like a daemon",
                seen(RunFileSeen::Absent, healthy(7, V), Ready, held(ident(7, 1, "boot"), "reconciled"), 0), foreign(7, "reconciled")),
            ("the holder has the run-file's pid but other start ticks",
                seen(run(daemon()), healthy(100, V), Ready, held(ident(100, 9999, "boot"), "reconciled"), 0), foreign(100, "reconciled")),
            ("the holder has the run-file's pid and ticks from another boot",
                seen(run(ident(100, 5000, "old-boot")), healthy(100, V), Ready, held(daemon(), "reconciled"), 0), foreign(100, "reconciled")),
            ("port free, run-file names a dead or reused pid",
                seen(run(daemon()), HealthSeen::NoAnswer, NoAnswer, PortSeen::Free, 0), Spawn { remove_run_file: true }),
            ("port free, no run-file",
                seen(RunFileSeen::Absent, HealthSeen::NoAnswer, NoAnswer, PortSeen::Free, 0), Spawn { remove_run_file: false }),
            ("port free, invalid run-file",
                seen(RunFileSeen::Invalid, HealthSeen::NoAnswer, NoAnswer, PortSeen::Free, 0), Spawn { remove_run_file: false }),
            ("invalid run-file, something holds the port: never followed",
                seen(RunFileSeen::Invalid, healthy(100, V), Ready, held(daemon(), "reconciled"), 0), foreign(100, "reconciled")),
            ("the holder cannot be identified",
                seen(run(daemon()), healthy(100, V), Ready, PortSeen::Unknown, 0), Refuse(RefuseBecause::UnknownHolder)),
        ];
        for (what, seen, want) in cases {
            assert_eq!(plan_daemon_takeover(&seen), want, "{what}");
        }
    }

    #[test]
    fn a_daemon_still_starting_is_waited_for_never_doubled() {
        let mut s = seen(
            run(ident(50, 1, "boot")),
            HealthSeen::NoAnswer,
            ReadySeen::NoAnswer,
            PortSeen::Free,
            0,
        );
        s.lock_holder = Some(100);
        assert_eq!(
            plan_daemon_takeover(&s),
            TakeoverPlan::WaitForStart { pid: 100 }
        );
        // Bound, run-file not yet written (it still names the dead daemon).
        s.port = held(daemon(), "reconciled");
        assert_eq!(
            plan_daemon_takeover(&s),
            TakeoverPlan::WaitForStart { pid: 100 }
        );
        // A foreign port holder is still refused, whoever holds the lock.
        s.port = held(ident(7, 1, "boot"), "python3");
        assert!(matches!(
            plan_daemon_takeover(&s),
            TakeoverPlan::Refuse(RefuseBecause::ForeignHolder { pid: 7, .. })
        ));
        s.port = PortSeen::Free;
        s.waited_ms = 30_000;
        assert_eq!(
            plan_daemon_takeover(&s),
            TakeoverPlan::Refuse(RefuseBecause::StuckStarting { pid: 100 })
        );
        // The verified daemon of the run-file holding its own lock is planned as before.
        let mut s = seen(
            run(daemon()),
            healthy(100, V),
            ReadySeen::Ready,
            held(daemon(), "reconciled"),
            0,
        );
        s.lock_holder = Some(100);
        assert_eq!(plan_daemon_takeover(&s), TakeoverPlan::Reuse { pid: 100 });
    }

    #[test]
    fn a_restart_replaces_only_our_daemon() {
        let mut s = seen(
            run(daemon()),
            healthy(100, V),
            ReadySeen::Ready,
            held(daemon(), "reconciled"),
            0,
        );
        s.restart = true;
        assert_eq!(
            plan_daemon_takeover(&s),
            TakeoverPlan::Replace {
                daemon: daemon(),
                because: ReplaceBecause::Requested
            }
        );
        s.port = held(ident(7, 1, "boot"), "python3");
        assert!(matches!(plan_daemon_takeover(&s), TakeoverPlan::Refuse(_)));
        s.port = PortSeen::Free;
        assert_eq!(
            plan_daemon_takeover(&s),
            TakeoverPlan::Spawn {
                remove_run_file: true
            }
        );
    }

    #[test]
    fn only_the_verified_holder_is_ever_replaced() {
        let holders = [
            daemon(),
            ident(100, 1, "boot"),
            ident(101, 5000, "boot"),
            ident(100, 5000, "b2"),
        ];
        let runs = [RunFileSeen::Absent, RunFileSeen::Invalid, run(daemon())];
        let healths = [HealthSeen::NoAnswer, healthy(100, V), healthy(100, "x")];
        for holder in &holders {
            for run_file in &runs {
                for health in &healths {
                    for ready in [
                        ReadySeen::Ready,
                        ReadySeen::Reconciling,
                        ReadySeen::NoAnswer,
                    ] {
                        let s = seen(
                            run_file.clone(),
                            health.clone(),
                            ready,
                            held(holder.clone(), "p"),
                            60_000,
                        );
                        if let TakeoverPlan::Replace { daemon: target, .. } =
                            plan_daemon_takeover(&s)
                        {
                            assert_eq!(target, daemon());
                            assert_eq!(*run_file, run(daemon()));
                        }
                    }
                }
            }
        }
    }
}
