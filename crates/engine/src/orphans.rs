//! The orphan pass: find processes that ended sessions left running (by their ownership
//! marker, not by parent links or process groups), and stop them with proof of identity.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use reconcile_core::{
    OrphanCounts, OrphanDecision, OwnerMarker, Pass, SessionId, SessionState, TmuxProbe, Warning,
    WarningCode, decide_orphan,
};
use reconcile_proc::{Marked, Target};
use reconcile_store::Store;

use crate::host::Host;

/// How long an orphan gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// What an orphan pass found and did; `tmux_answered` is false when it had orphans to stop but
/// could not tell our tmux server apart, and so stopped nothing.
pub(crate) struct OrphanPass {
    pub counts: OrphanCounts,
    pub tmux_answered: bool,
}

/// Scan every process, stop those whose marker names an ended session of this instance.
pub(crate) fn reap_orphans(store: &Store, host: &Host, warnings: &mut Vec<Warning>) -> OrphanPass {
    let mut states: HashMap<SessionId, Option<SessionState>> = HashMap::new();
    reap_where(host, warnings, |marker| {
        let state = *states
            .entry(marker.session.clone())
            .or_insert_with(|| store.get(&marker.session).ok().flatten().map(|s| s.state));
        decide_orphan(marker, &host.instance_id, state)
    })
}

/// Stop every process that sessions which are ending left running (their tmux sessions are
/// already gone). One scan, however many sessions.
pub(crate) fn reap_sessions(
    host: &Host,
    sessions: &HashSet<SessionId>,
    warnings: &mut Vec<Warning>,
) -> OrphanPass {
    reap_where(host, warnings, |marker| {
        let state = sessions
            .contains(&marker.session)
            .then_some(SessionState::Terminated);
        match decide_orphan(marker, &host.instance_id, state) {
            // Other sessions of ours are none of this stop's business.
            OrphanDecision::KeepUnknownSession => OrphanDecision::KeepRunning,
            decision => decision,
        }
    })
}

fn reap_where(
    host: &Host,
    warnings: &mut Vec<Warning>,
    mut decide: impl FnMut(&OwnerMarker) -> OrphanDecision,
) -> OrphanPass {
    let mut counts = OrphanCounts::default();
    let done = |counts, tmux_answered| OrphanPass {
        counts,
        tmux_answered,
    };
    let scan = match reconcile_proc::scan_markers(&host.boot_id) {
        Ok(scan) => scan,
        Err(e) => {
            warnings.push(Warning {
                pass: Pass::Orphans,
                session: None,
                code: WarningCode::OrphanScanFailed,
                message: e.to_string(),
            });
            return done(counts, true);
        }
    };
    counts.scanned = scan.scanned;
    counts.marked = scan.marked.len() as u64;
    let mut targets = Vec::new();
    for Marked { identity, marker } in scan.marked {
        // A marker that does not parse was not written by any instance of ours.
        let decision =
            OwnerMarker::parse(&marker).map_or(OrphanDecision::KeepOtherInstance, |m| decide(&m));
        counts.count(decision);
        if decision == OrphanDecision::Orphan {
            targets.push(Target { identity, marker });
        }
    }
    if targets.is_empty() {
        return done(counts, true);
    }
    if !spare_the_tmux_server(host, &mut targets, &mut counts) {
        tracing::warn!(
            orphans = targets.len(),
            "tmux does not answer: no orphan is stopped this time"
        );
        return done(counts, false);
    }
    if !host.reap_orphans {
        tracing::warn!(
            orphans = targets.len(),
            "orphan reaping is switched off; leaving them running"
        );
        return done(counts, true);
    }
    let reaped = reconcile_proc::reap(&host.boot_id, &targets, GRACE);
    counts.terminated = reaped.terminated;
    counts.killed = reaped.killed;
    counts.vanished = reaped.vanished;
    counts.failed = reaped.failed.len() as u64;
    for pid in reaped.failed {
        warnings.push(Warning {
            pass: Pass::Orphans,
            session: None,
            code: WarningCode::OrphanStopFailed,
            message: format!("orphan process {pid} could not be stopped"),
        });
    }
    if counts.reaped() > 0 {
        tracing::info!(
            terminated = counts.terminated,
            killed = counts.killed,
            "reaped orphan processes"
        );
    }
    done(counts, true)
}

/// Never stop our tmux server, whatever its environment says: every session lives in it. When
/// tmux does not answer, the server cannot be told apart, and nothing is stopped (`false`).
fn spare_the_tmux_server(
    host: &Host,
    targets: &mut Vec<Target>,
    counts: &mut OrphanCounts,
) -> bool {
    let before = targets.len();
    match host.tmux.probe() {
        TmuxProbe::Listing(listing) => {
            if let Some(server) = listing.server {
                targets.retain(|t| t.identity != server);
            }
        }
        TmuxProbe::NoServer => {}
        TmuxProbe::Failed => return false,
    }
    let spared = (before - targets.len()) as u64;
    counts.orphans -= spared;
    counts.kept_running += spared;
    true
}
