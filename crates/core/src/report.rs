//! The reconcile report: counts by (pass, evidence, disposition), durations, child processes,
//! and a bounded list of individual warnings.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::classify::Disposition;
use crate::evidence::Evidence;
use crate::model::SessionId;
use crate::orphan::OrphanCounts;
use crate::pool::PoolCounts;

/// At most this many individual warnings are kept; the rest are counted in `more_warnings`.
pub const MAX_WARNINGS: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// Running and spawning rows: adopt the living, preserve and end the dead.
    Live,
    /// Terminated rows: destroy runtimes that leaked.
    Reap,
    /// Saved rows: relaunch what a clean shutdown saved.
    Restore,
    /// Processes that ended sessions left running.
    Orphans,
    /// Leases, warm slots and windows (before any provisioning).
    Pool,
}

impl Pass {
    pub fn as_str(self) -> &'static str {
        match self {
            Pass::Live => "live",
            Pass::Reap => "reap",
            Pass::Restore => "restore",
            Pass::Orphans => "orphans",
            Pass::Pool => "pool",
        }
    }
}

impl fmt::Display for Pass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Rows of one pass that got one disposition on one kind of evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub pass: Pass,
    pub evidence: Evidence,
    pub disposition: Disposition,
    pub count: u64,
}

/// Why an individual warning was raised: only unexpected outcomes get one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    /// Uncommitted work could not be captured; the row was kept as it was.
    PreserveFailed,
    /// Destroying a runtime failed with something other than not-found.
    StopFailed,
    /// A saved session could not be relaunched; it stays saved.
    RestoreFailed,
    /// The database refused a change; the row is as it was before.
    StoreFailed,
    /// `/proc` could not be scanned for marked processes.
    OrphanScanFailed,
    /// An orphan survived SIGKILL, or could not be signalled.
    OrphanStopFailed,
    /// A lease, slot or window could not be reconciled; it was left as it was.
    PoolFailed,
}

/// One unexpected outcome, in words safe to show anywhere.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub pass: Pass,
    pub session: Option<SessionId>,
    pub code: WarningCode,
    pub message: String,
}

/// One pass's size and cost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassReport {
    pub pass: Pass,
    pub rows: u64,
    pub duration_ms: u64,
    pub child_processes: u64,
    /// Whether the batched probe answered; `false` means every probed row was `unknown`.
    pub probe_answered: bool,
}

/// The report of one reconcile.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub passes: Vec<PassReport>,
    pub counts: Vec<Count>,
    pub warnings: Vec<Warning>,
    /// Warnings beyond [`MAX_WARNINGS`], counted but not kept.
    pub more_warnings: u64,
    pub duration_ms: u64,
    pub child_processes: u64,
    /// The orphan pass, when one ran.
    #[serde(default)]
    pub orphans: Option<OrphanCounts>,
    /// The pool pass, when one ran.
    #[serde(default)]
    pub pool: Option<PoolCounts>,
}

impl Report {
    pub fn count(&mut self, pass: Pass, evidence: Evidence, disposition: Disposition) {
        match self
            .counts
            .iter_mut()
            .find(|c| c.pass == pass && c.evidence == evidence && c.disposition == disposition)
        {
            Some(c) => c.count += 1,
            None => self.counts.push(Count {
                pass,
                evidence,
                disposition,
                count: 1,
            }),
        }
    }

    pub fn warn(&mut self, warning: Warning) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(warning);
        } else {
            self.more_warnings += 1;
        }
    }

    pub fn add_pass(&mut self, pass: PassReport) {
        self.duration_ms += pass.duration_ms;
        self.child_processes += pass.child_processes;
        self.passes.push(pass);
    }

    /// How many rows got a disposition that changed something, and orphans stopped.
    pub fn actions(&self) -> u64 {
        let rows: u64 = self
            .counts
            .iter()
            .filter(|c| c.disposition.is_action())
            .map(|c| c.count)
            .sum();
        rows + self.orphans.as_ref().map_or(0, OrphanCounts::reaped)
            + self.pool.as_ref().map_or(0, PoolCounts::actions)
    }

    /// Rows with `disposition`, over every pass and evidence.
    pub fn total(&self, disposition: Disposition) -> u64 {
        self.counts
            .iter()
            .filter(|c| c.disposition == disposition)
            .map(|c| c.count)
            .sum()
    }

    /// Rows counted under (evidence, disposition), over every pass.
    pub fn counted(&self, evidence: Evidence, disposition: Disposition) -> u64 {
        self.counts
            .iter()
            .filter(|c| c.evidence == evidence && c.disposition == disposition)
            .map(|c| c.count)
            .sum()
    }

    pub fn warning_count(&self) -> u64 {
        self.warnings.len() as u64 + self.more_warnings
    }
}

/// A human summary: one line per count, then the warnings and "and N more".
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "reconcile: {} ms, {} child processes",
            self.duration_ms, self.child_processes
        )?;
        for p in &self.passes {
            let probe = if p.probe_answered {
                ""
            } else {
                " (probe did not answer)"
            };
            writeln!(
                f,
                "  {:<8} {:>6} rows {:>6} ms {:>4} children{probe}",
                p.pass.as_str(),
                p.rows,
                p.duration_ms,
                p.child_processes
            )?;
        }
        for c in &self.counts {
            writeln!(
                f,
                "  {:<8} {:<15} {:<23} {}",
                c.pass.as_str(),
                c.evidence.as_str(),
                c.disposition.as_str(),
                c.count
            )?;
        }
        for w in &self.warnings {
            let session = w.session.as_ref().map_or("-", |s| s.as_str());
            writeln!(f, "  warning [{}] {session}: {}", w.pass, w.message)?;
        }
        if let Some(o) = &self.orphans {
            writeln!(
                f,
                "  orphans: {} scanned, {} marked, {} orphaned ({} terminated, {} killed, {} vanished, {} failed); kept {} of running sessions, {} of other instances, {} of unknown sessions",
                o.scanned,
                o.marked,
                o.orphans,
                o.terminated,
                o.killed,
                o.vanished,
                o.failed,
                o.kept_running,
                o.kept_other_instance,
                o.kept_unknown_session
            )?;
        }
        if let Some(p) = &self.pool {
            writeln!(
                f,
                "  pool: {} leases ({} kept, {} renewed, {} unowned reaped, {} stale reaped, {} released as their session ended); {} slots ({} kept, {} returned, {} removed, {} retired, {} half-made removed); {} windows closed; {} failed",
                p.leases,
                p.leases_kept,
                p.leases_renewed,
                p.leases_reaped_unowned,
                p.leases_reaped_stale,
                p.leases_released_session_ended,
                p.slots,
                p.slots_kept,
                p.slots_returned,
                p.slots_removed,
                p.slots_retired,
                p.slots_half_made_removed,
                p.windows_closed,
                p.failed
            )?;
        }
        if self.more_warnings > 0 {
            writeln!(f, "  and {} more", self.more_warnings)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warning(i: usize) -> Warning {
        Warning {
            pass: Pass::Live,
            session: None,
            code: WarningCode::StopFailed,
            message: format!("w{i}"),
        }
    }

    #[test]
    fn warnings_are_bounded() {
        let mut r = Report::default();
        for i in 0..25 {
            r.warn(warning(i));
        }
        assert_eq!(r.warnings.len(), MAX_WARNINGS);
        assert_eq!(r.more_warnings, 5);
        assert_eq!(r.warning_count(), 25);
        assert!(r.to_string().ends_with("  and 5 more\n"), "{r}");
    }

    #[test]
    fn counts_aggregate() {
        let mut r = Report::default();
        r.count(Pass::Live, Evidence::Alive, Disposition::Adopt);
        r.count(Pass::Live, Evidence::Alive, Disposition::Adopt);
        r.count(Pass::Reap, Evidence::Alive, Disposition::Reap);
        assert_eq!(r.counts.len(), 2);
        assert_eq!(r.counted(Evidence::Alive, Disposition::Adopt), 2);
        assert_eq!(r.actions(), 1);
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            json.contains(r#""evidence":"alive","disposition":"adopt","count":2"#),
            "{json}"
        );
    }
}
