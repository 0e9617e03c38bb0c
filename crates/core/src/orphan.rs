//! Which marked processes are orphans: processes a session started that outlived it.

use serde::{Deserialize, Serialize};

use crate::model::{OwnerMarker, SessionState};

/// What to do with a process that carries an ownership marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrphanDecision {
    /// This instance's session has ended: stop the process.
    Orphan,
    /// Its session still runs (or is starting): leave it.
    KeepRunning,
    /// Another state directory's process: never ours to touch; counted.
    KeepOtherInstance,
    /// Our instance, but no such session row: proves nothing; counted.
    KeepUnknownSession,
}

/// Decide about one marked process. `state` is its session's state, `None` when there is no
/// such row. A process without a marker is never considered at all.
pub fn decide_orphan(
    marker: &OwnerMarker,
    instance: &str,
    state: Option<SessionState>,
) -> OrphanDecision {
    if marker.instance != instance {
        return OrphanDecision::KeepOtherInstance;
    }
    match state {
        None => OrphanDecision::KeepUnknownSession,
        Some(SessionState::Terminated) => OrphanDecision::Orphan,
        // A saved session is restored or adopted at boot; its teardown already reaped what it
        // left, so anything still marked with it may be the session itself.
        Some(SessionState::Running | SessionState::Spawning | SessionState::Saved) => {
            OrphanDecision::KeepRunning
        }
    }
}

/// What one orphan pass found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanCounts {
    /// Processes looked at.
    pub scanned: u64,
    /// Processes carrying a marker.
    pub marked: u64,
    pub orphans: u64,
    /// Orphans that exited after SIGTERM.
    pub terminated: u64,
    /// Orphans that needed SIGKILL.
    pub killed: u64,
    /// Orphans that were gone, or no longer the same process, by the time they were checked.
    pub vanished: u64,
    /// Orphans that could not be stopped.
    pub failed: u64,
    pub kept_running: u64,
    pub kept_other_instance: u64,
    pub kept_unknown_session: u64,
}

impl OrphanCounts {
    pub fn count(&mut self, decision: OrphanDecision) {
        match decision {
            OrphanDecision::Orphan => self.orphans += 1,
            OrphanDecision::KeepRunning => self.kept_running += 1,
            OrphanDecision::KeepOtherInstance => self.kept_other_instance += 1,
            OrphanDecision::KeepUnknownSession => self.kept_unknown_session += 1,
        }
    }

    /// Orphans stopped, by SIGTERM or SIGKILL.
    pub fn reaped(&self) -> u64 {
        self.terminated + self.killed
    }

    pub fn add(&mut self, other: &OrphanCounts) {
        self.scanned += other.scanned;
        self.marked += other.marked;
        self.orphans += other.orphans;
        self.terminated += other.terminated;
        self.killed += other.killed;
        self.vanished += other.vanished;
        self.failed += other.failed;
        self.kept_running += other.kept_running;
        self.kept_other_instance += other.kept_other_instance;
        self.kept_unknown_session += other.kept_unknown_session;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SessionId;

    fn marker(instance: &str) -> OwnerMarker {
        OwnerMarker {
            instance: instance.into(),
            session: SessionId::parse("s1").unwrap(),
        }
    }

    #[test]
    fn every_case() {
        use OrphanDecision::*;
        use SessionState::*;
        #[rustfmt::skip]
        let cases = [
            ("ours, session terminated", "me", Some(Terminated), Orphan),
            ("ours, session saved for restore", "me", Some(Saved), KeepRunning),
            ("ours, session running", "me", Some(Running), KeepRunning),
            ("ours, session starting", "me", Some(Spawning), KeepRunning),
            ("ours, no such session", "me", None, KeepUnknownSession),
            ("another instance, its session terminated here too", "other", Some(Terminated), KeepOtherInstance),
            ("another instance, unknown session", "other", None, KeepOtherInstance),
        ];
        for (what, instance, state, want) in cases {
            assert_eq!(
                decide_orphan(&marker(instance), "me", state),
                want,
                "{what}"
            );
        }
    }
}
