//! The classifier: the one place that turns (row state, evidence, stop result) into a decision.
//!
//! Every path that decides about a session (the live, reap and restore passes, a user's stop,
//! a clean shutdown that saves sessions) goes through [`classify`]; there is no second copy of
//! these rules.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::evidence::Evidence;
use crate::model::SessionState;

/// What an attempt to stop (destroy) a runtime returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopOutcome {
    Stopped,
    /// A typed not-found: the runtime was already gone.
    NotFound,
    /// Any other error.
    Failed,
}

impl StopOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            StopOutcome::Stopped => "stopped",
            StopOutcome::NotFound => "not_found",
            StopOutcome::Failed => "failed",
        }
    }
}

/// What to do with one row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Disposition {
    /// The runtime survived: nothing to do.
    Adopt,
    /// A saved or spawning row whose runtime runs: record it as running.
    MarkRunning,
    /// The runtime is gone (or was just stopped): capture uncommitted work, mark terminated.
    PreserveAndTerminate,
    /// Not enough proof to act: keep the row as it is and count it.
    Preserve,
    /// A terminated row whose runtime still runs (leaked): destroy the runtime.
    Reap,
    /// A terminated row whose runtime is gone: nothing to do.
    NoAction,
    /// Saved by a clean shutdown and dead: relaunch it with its resume token.
    Restore,
    /// Stop said not-found and liveness confirms it: repair the row, keeping what is resumable.
    RepairRow,
    /// Stop failed in a way that proves nothing: keep the row, warn individually.
    PreserveWithWarning,
}

impl Disposition {
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Adopt => "adopt",
            Disposition::MarkRunning => "mark_running",
            Disposition::PreserveAndTerminate => "preserve_and_terminate",
            Disposition::Preserve => "preserve",
            Disposition::Reap => "reap",
            Disposition::NoAction => "no_action",
            Disposition::Restore => "restore",
            Disposition::RepairRow => "repair_row",
            Disposition::PreserveWithWarning => "preserve_with_warning",
        }
    }

    /// Whether this disposition changes anything (a row, a runtime, a ref).
    pub fn is_action(self) -> bool {
        matches!(
            self,
            Disposition::MarkRunning
                | Disposition::PreserveAndTerminate
                | Disposition::Reap
                | Disposition::Restore
                | Disposition::RepairRow
        )
    }
}

impl fmt::Display for Disposition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Decide about one row. `stop` is `None` when deciding from a probe, and the outcome of the
/// stop when deciding what a stop attempt means.
pub fn classify(state: SessionState, evidence: Evidence, stop: Option<StopOutcome>) -> Disposition {
    use Disposition as D;
    use Evidence as E;
    use SessionState as S;

    match stop {
        Some(StopOutcome::Stopped) => match state {
            S::Terminated => D::Reap,
            S::Running | S::Spawning => D::PreserveAndTerminate,
            // Torn down on purpose by a clean shutdown; the next boot restores it.
            S::Saved => D::NoAction,
        },
        Some(StopOutcome::NotFound) if evidence == E::ConfirmedDead => D::RepairRow,
        // A not-found without confirmed death, or any other error, proves nothing.
        Some(StopOutcome::NotFound | StopOutcome::Failed) => D::PreserveWithWarning,
        None => match (state, evidence) {
            (_, E::Unknown | E::NoHandle | E::Remote) => D::Preserve,
            (S::Running, E::Alive) => D::Adopt,
            (S::Running, E::ConfirmedDead) => D::PreserveAndTerminate,
            (S::Terminated, E::Alive) => D::Reap,
            (S::Terminated, E::ConfirmedDead) => D::NoAction,
            (S::Saved, E::Alive) => D::MarkRunning,
            (S::Saved, E::ConfirmedDead) => D::Restore,
            (S::Spawning, E::Alive) => D::MarkRunning,
            // A crash mid-create: keep the worktree, capture whatever it holds, end the row.
            (S::Spawning, E::ConfirmedDead) => D::PreserveAndTerminate,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell of the matrix: state, evidence, stop result, disposition.
    const TABLE: &str = "
spawning   alive           -          mark_running
spawning   alive           stopped    preserve_and_terminate
spawning   alive           not_found  preserve_with_warning
spawning   alive           failed     preserve_with_warning
spawning   confirmed_dead  -          preserve_and_terminate
spawning   confirmed_dead  stopped    preserve_and_terminate
spawning   confirmed_dead  not_found  repair_row
spawning   confirmed_dead  failed     preserve_with_warning
spawning   unknown         -          preserve
spawning   unknown         stopped    preserve_and_terminate
spawning   unknown         not_found  preserve_with_warning
spawning   unknown         failed     preserve_with_warning
spawning   no_handle       -          preserve
spawning   no_handle       stopped    preserve_and_terminate
spawning   no_handle       not_found  preserve_with_warning
spawning   no_handle       failed     preserve_with_warning
spawning   remote          -          preserve
spawning   remote          stopped    preserve_and_terminate
spawning   remote          not_found  preserve_with_warning
spawning   remote          failed     preserve_with_warning
running    alive           -          adopt
running    alive           stopped    preserve_and_terminate
running    alive           not_found  preserve_with_warning
running    alive           failed     preserve_with_warning
running    confirmed_dead  -          preserve_and_terminate
running    confirmed_dead  stopped    preserve_and_terminate
running    confirmed_dead  not_found  repair_row
running    confirmed_dead  failed     preserve_with_warning
running    unknown         -          preserve
running    unknown         stopped    preserve_and_terminate
running    unknown         not_found  preserve_with_warning
running    unknown         failed     preserve_with_warning
running    no_handle       -          preserve
running    no_handle       stopped    preserve_and_terminate
running    no_handle       not_found  preserve_with_warning
running    no_handle       failed     preserve_with_warning
running    remote          -          preserve
running    remote          stopped    preserve_and_terminate
running    remote          not_found  preserve_with_warning
running    remote          failed     preserve_with_warning
saved      alive           -          mark_running
saved      alive           stopped    no_action
saved      alive           not_found  preserve_with_warning
saved      alive           failed     preserve_with_warning
saved      confirmed_dead  -          restore
saved      confirmed_dead  stopped    no_action
saved      confirmed_dead  not_found  repair_row
saved      confirmed_dead  failed     preserve_with_warning
saved      unknown         -          preserve
saved      unknown         stopped    no_action
saved      unknown         not_found  preserve_with_warning
saved      unknown         failed     preserve_with_warning
saved      no_handle       -          preserve
saved      no_handle       stopped    no_action
saved      no_handle       not_found  preserve_with_warning
saved      no_handle       failed     preserve_with_warning
saved      remote          -          preserve
saved      remote          stopped    no_action
saved      remote          not_found  preserve_with_warning
saved      remote          failed     preserve_with_warning
terminated alive           -          reap
terminated alive           stopped    reap
terminated alive           not_found  preserve_with_warning
terminated alive           failed     preserve_with_warning
terminated confirmed_dead  -          no_action
terminated confirmed_dead  stopped    reap
terminated confirmed_dead  not_found  repair_row
terminated confirmed_dead  failed     preserve_with_warning
terminated unknown         -          preserve
terminated unknown         stopped    reap
terminated unknown         not_found  preserve_with_warning
terminated unknown         failed     preserve_with_warning
terminated no_handle       -          preserve
terminated no_handle       stopped    reap
terminated no_handle       not_found  preserve_with_warning
terminated no_handle       failed     preserve_with_warning
terminated remote          -          preserve
terminated remote          stopped    reap
terminated remote          not_found  preserve_with_warning
terminated remote          failed     preserve_with_warning
";

    #[test]
    fn every_cell_of_the_matrix() {
        let stops = [
            None,
            Some(StopOutcome::Stopped),
            Some(StopOutcome::NotFound),
            Some(StopOutcome::Failed),
        ];
        let mut actual = String::from("\n");
        for state in SessionState::ALL {
            for evidence in Evidence::ALL {
                for stop in stops {
                    let stop_name = stop.map_or("-", StopOutcome::as_str);
                    let d = classify(state, evidence, stop);
                    actual.push_str(&format!(
                        "{:<10} {:<15} {:<10} {}\n",
                        state.as_str(),
                        evidence.as_str(),
                        stop_name,
                        d.as_str()
                    ));
                }
            }
        }
        assert_eq!(actual, TABLE, "classifier table changed:\n{actual}");
    }

    #[test]
    fn only_confirmed_dead_with_not_found_repairs() {
        for state in SessionState::ALL {
            for evidence in Evidence::ALL {
                let d = classify(state, evidence, Some(StopOutcome::NotFound));
                assert_eq!(
                    d == Disposition::RepairRow,
                    evidence == Evidence::ConfirmedDead
                );
            }
        }
    }

    #[test]
    fn nothing_is_done_without_proof() {
        for state in SessionState::ALL {
            for evidence in [Evidence::Unknown, Evidence::NoHandle, Evidence::Remote] {
                assert!(
                    !classify(state, evidence, None).is_action(),
                    "{state} {evidence}"
                );
            }
        }
    }
}
