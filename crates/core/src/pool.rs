//! Windows, warm slots and leases (LEAK-003): what the pool pass decides about each lease, slot
//! and window, and how many slots a window still needs provisioned.
//!
//! The pool pass runs before any provisioning, at boot and on every sweep. Leases are decided
//! first (with the states of their sessions, after the session passes), then slots (knowing which
//! leases survived), then windows. Time comes in as `now_ms`; nothing here reads a clock.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::model::{SessionId, SessionState};

macro_rules! pool_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn parse(value: &str) -> Result<$name, Error> {
                if crate::model::valid_id(value) {
                    Ok($name(value.to_owned()))
                } else {
                    Err(Error::InvalidId {
                        kind: $kind,
                        value: value.chars().take(80).collect(),
                    })
                }
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = Error;
            fn try_from(value: String) -> Result<Self, Error> {
                $name::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({})"), self.0)
            }
        }
    };
}

pool_id!(
    /// A window's id.
    WindowId,
    "window"
);
pool_id!(
    /// A warm slot's id; it also names the slot's worktree directory and branch.
    SlotId,
    "slot"
);
pool_id!(
    /// A lease's id: what its holder renews and releases it by.
    LeaseId,
    "lease"
);

impl SlotId {
    /// The branch a slot's worktree is created on.
    pub fn branch(&self) -> String {
        format!("reconcile/slot-{}", self.0)
    }

    /// Where uncommitted work found in a released slot is kept.
    pub fn preserved_ref(&self) -> String {
        format!("refs/reconcile/preserved/slot-{}", self.0)
    }
}

macro_rules! pool_state {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $expected:literal { $($(#[$vdoc:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(value: &str) -> Result<Self, Error> {
                match value {
                    $($text => Ok($name::$variant),)+
                    _ => Err(Error::UnknownPoolState {
                        kind: $kind,
                        value: value.chars().take(40).collect(),
                        expected: $expected,
                    }),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pool_state!(
    /// Where a window is in its life.
    WindowState, "window", "open, closing or closed" {
        /// Its pool is kept provisioned.
        Open => "open",
        /// A close began: free slots go, slots holding a session's work stay until it ends.
        Closing => "closing",
        /// Nothing of its pool is left but retired slots.
        Closed => "closed",
    }
);

pool_state!(
    /// Where a slot is in its life.
    SlotState, "slot", "provisioning, free, leased, used or retired" {
        /// The row exists; its worktree may not yet. Found at boot, it is half-made.
        Provisioning => "provisioning",
        /// A clean worktree at its base commit, never handed out.
        Free => "free",
        /// Held by a lease of an outside owner; no session runs in it.
        Leased => "leased",
        /// A session runs (or ran) in it.
        Used => "used",
        /// Out of the pool for good: its worktree holds work and is kept, never deleted.
        Retired => "retired",
    }
);

/// A named group of sessions on one repository, with a pool of warm slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub id: WindowId,
    pub name: Option<String>,
    pub repo: PathBuf,
    pub state: WindowState,
    /// How many free slots the pool keeps ready.
    pub target: u32,
    pub created_at_ms: i64,
}

/// A prepared worktree on a fresh branch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Slot {
    pub id: SlotId,
    /// `None` when no window was ever recorded for it.
    pub window: Option<WindowId>,
    pub repo: PathBuf,
    pub worktree: PathBuf,
    pub branch: String,
    /// The commit the branch was created at; a slot whose HEAD moved is not returned to the pool.
    pub base: String,
    pub state: SlotState,
    /// The session running in it, for `used` slots.
    pub session: Option<SessionId>,
    pub updated_at_ms: i64,
}

/// A slot held by an owner who must renew it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: LeaseId,
    pub slot: SlotId,
    pub owner: String,
    /// The session that holds it, for leases the daemon holds (and renews) for its sessions.
    pub session: Option<SessionId>,
    pub heartbeat_ms: i64,
    pub ttl_ms: i64,
    pub acquired_ms: i64,
}

/// Why a lease is reaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseReap {
    /// Its owner is empty: nobody can renew or release it.
    Unowned,
    /// Its heartbeat is older than its TTL: its owner died without releasing it.
    Stale,
    /// The session that held it has ended (or has no row).
    SessionEnded,
}

/// What to do with one lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseDecision {
    Keep,
    /// A live session's lease whose heartbeat is a quarter of its TTL old: the daemon renews it.
    Renew,
    Reap(LeaseReap),
}

/// Decide about one lease. `session` is the state of the session holding it (for session
/// leases), `None` when it has no row.
pub fn decide_lease(lease: &Lease, session: Option<SessionState>, now_ms: i64) -> LeaseDecision {
    if lease.owner.trim().is_empty() {
        return LeaseDecision::Reap(LeaseReap::Unowned);
    }
    let age = now_ms.saturating_sub(lease.heartbeat_ms);
    if lease.session.is_some() {
        return match session {
            Some(SessionState::Running | SessionState::Spawning | SessionState::Saved) => {
                if age >= lease.ttl_ms / 4 {
                    LeaseDecision::Renew
                } else {
                    LeaseDecision::Keep
                }
            }
            Some(SessionState::Terminated) | None => LeaseDecision::Reap(LeaseReap::SessionEnded),
        };
    }
    if age > lease.ttl_ms {
        LeaseDecision::Reap(LeaseReap::Stale)
    } else {
        LeaseDecision::Keep
    }
}

/// A slot's window as the pool pass sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSeen {
    Open,
    Closing,
    /// No window row, a closed window, or no window ever recorded: the pool's owner is gone.
    Gone,
}

impl WindowSeen {
    pub fn of(window: Option<WindowState>) -> WindowSeen {
        match window {
            Some(WindowState::Open) => WindowSeen::Open,
            Some(WindowState::Closing) => WindowSeen::Closing,
            Some(WindowState::Closed) | None => WindowSeen::Gone,
        }
    }
}

/// Everything the slot decision needs, gathered after the lease decisions were carried out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotSeen {
    pub state: SlotState,
    pub window: WindowSeen,
    /// A lease on it survived the lease pass.
    pub leased: bool,
    /// For `used` slots: its session's state, `None` when it has no row.
    pub session: Option<SessionState>,
    /// At boot no provisioning is in flight, so a `provisioning` slot is half-made. While the
    /// daemon runs it may be in the provisioner's hands and is left alone.
    pub boot: bool,
}

/// What to do with one slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlotDecision {
    Keep,
    /// Provisioning was interrupted by a crash: remove what it made (it never held anyone's work).
    RemoveHalfMade,
    /// Nobody holds it any more (its lease ended, or its window is gone): look at its worktree
    /// and decide with [`decide_release`].
    Release,
    /// Its session ended: it leaves the pool and its worktree stays, holding that session's work.
    Retire,
}

/// Decide about one slot.
pub fn decide_slot(seen: SlotSeen) -> SlotDecision {
    let window_open = seen.window == WindowSeen::Open;
    match seen.state {
        SlotState::Retired => SlotDecision::Keep,
        SlotState::Provisioning if seen.boot => SlotDecision::RemoveHalfMade,
        SlotState::Provisioning => SlotDecision::Keep,
        SlotState::Free if window_open => SlotDecision::Keep,
        SlotState::Free => SlotDecision::Release,
        SlotState::Leased if seen.leased && window_open => SlotDecision::Keep,
        SlotState::Leased => SlotDecision::Release,
        SlotState::Used => match seen.session {
            Some(SessionState::Running | SessionState::Spawning | SessionState::Saved) => {
                SlotDecision::Keep
            }
            Some(SessionState::Terminated) | None => SlotDecision::Retire,
        },
    }
}

/// A released slot's worktree, as git sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorktreeSeen {
    pub exists: bool,
    /// No modified, staged or untracked file.
    pub clean: bool,
    /// HEAD is still the slot's base commit.
    pub at_base: bool,
}

/// What to do with a slot nobody holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleaseDecision {
    /// Clean and unmoved, and its window is open: free again.
    ReturnToPool,
    /// Clean and unmoved, and its window is gone or closing: remove the worktree, branch and row.
    Remove,
    /// It holds work (uncommitted, or commits on its branch): preserve, retire, keep the worktree.
    PreserveAndRetire,
    /// Its worktree is already gone: only the row (and an unmoved branch) is left to remove.
    Forget,
}

pub fn decide_release(window: WindowSeen, worktree: WorktreeSeen) -> ReleaseDecision {
    if !worktree.exists {
        ReleaseDecision::Forget
    } else if !(worktree.clean && worktree.at_base) {
        ReleaseDecision::PreserveAndRetire
    } else if window == WindowSeen::Open {
        ReleaseDecision::ReturnToPool
    } else {
        ReleaseDecision::Remove
    }
}

/// What to do with a window once its slots were decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowDecision {
    Keep,
    /// A closing window with nothing left in its pool but retired slots.
    MarkClosed,
}

/// `live_slots`: its slots that are not retired.
pub fn decide_window(state: WindowState, live_slots: usize) -> WindowDecision {
    if state == WindowState::Closing && live_slots == 0 {
        WindowDecision::MarkClosed
    } else {
        WindowDecision::Keep
    }
}

/// How many more slots an open window needs provisioned to keep `target` free ones ready.
pub fn slots_to_provision(window: &Window, free: usize, provisioning: usize) -> u32 {
    if window.state != WindowState::Open {
        return 0;
    }
    let have = u32::try_from(free + provisioning).unwrap_or(u32::MAX);
    window.target.saturating_sub(have)
}

/// What one pool pass found and did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolCounts {
    pub leases: u64,
    pub leases_kept: u64,
    pub leases_renewed: u64,
    pub leases_reaped_unowned: u64,
    pub leases_reaped_stale: u64,
    pub leases_released_session_ended: u64,
    pub slots: u64,
    pub slots_kept: u64,
    pub slots_returned: u64,
    pub slots_removed: u64,
    pub slots_retired: u64,
    pub slots_half_made_removed: u64,
    pub windows_closed: u64,
    /// Actions that failed; each has a warning.
    pub failed: u64,
}

impl PoolCounts {
    /// Changes made; renewals are routine and do not count.
    pub fn actions(&self) -> u64 {
        self.leases_reaped_unowned
            + self.leases_reaped_stale
            + self.leases_released_session_ended
            + self.slots_returned
            + self.slots_removed
            + self.slots_retired
            + self.slots_half_made_removed
            + self.windows_closed
    }

    pub fn lease(&mut self, decision: LeaseDecision) {
        match decision {
            LeaseDecision::Keep => self.leases_kept += 1,
            LeaseDecision::Renew => self.leases_renewed += 1,
            LeaseDecision::Reap(LeaseReap::Unowned) => self.leases_reaped_unowned += 1,
            LeaseDecision::Reap(LeaseReap::Stale) => self.leases_reaped_stale += 1,
            LeaseDecision::Reap(LeaseReap::SessionEnded) => self.leases_released_session_ended += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: i64 = 60_000;
    const NOW: i64 = 10_000_000;

    fn lease(owner: &str, session: bool, age: i64) -> Lease {
        Lease {
            id: LeaseId::parse("l1").unwrap(),
            slot: SlotId::parse("s1").unwrap(),
            owner: owner.into(),
            session: session.then(|| SessionId::parse("abc").unwrap()),
            heartbeat_ms: NOW - age,
            ttl_ms: TTL,
            acquired_ms: 0,
        }
    }

    #[test]
    fn leases() {
        use LeaseDecision::*;
        use LeaseReap::*;
        let cases = [
            // outside owners
            (lease("ci", false, 0), None, Keep),
            (lease("ci", false, TTL), None, Keep),
            (lease("ci", false, TTL + 1), None, Reap(Stale)),
            (lease("ci", false, -5_000), None, Keep), // clock went back: not stale
            (lease("", false, 0), None, Reap(Unowned)),
            (lease("  ", false, 0), None, Reap(Unowned)),
            // the daemon's leases for its sessions
            (
                lease("session:abc", true, 0),
                Some(SessionState::Running),
                Keep,
            ),
            (
                lease("session:abc", true, TTL / 4),
                Some(SessionState::Running),
                Renew,
            ),
            // stale, but its session is alive again: the owner is back, renew
            (
                lease("session:abc", true, 10 * TTL),
                Some(SessionState::Spawning),
                Renew,
            ),
            (
                lease("session:abc", true, TTL / 2),
                Some(SessionState::Saved),
                Renew,
            ),
            (
                lease("session:abc", true, 0),
                Some(SessionState::Terminated),
                Reap(SessionEnded),
            ),
            (lease("session:abc", true, 0), None, Reap(SessionEnded)),
            (
                lease("", true, 0),
                Some(SessionState::Running),
                Reap(Unowned),
            ),
        ];
        for (l, session, want) in cases {
            assert_eq!(
                decide_lease(&l, session, NOW),
                want,
                "{l:?} with session {session:?}"
            );
        }
    }

    /// Every combination: what must never happen, whatever else changes.
    #[test]
    fn slots_every_combination() {
        let states = [
            SlotState::Provisioning,
            SlotState::Free,
            SlotState::Leased,
            SlotState::Used,
            SlotState::Retired,
        ];
        let windows = [WindowSeen::Open, WindowSeen::Closing, WindowSeen::Gone];
        let sessions = [
            None,
            Some(SessionState::Spawning),
            Some(SessionState::Running),
            Some(SessionState::Saved),
            Some(SessionState::Terminated),
        ];
        for state in states {
            for window in windows {
                for leased in [false, true] {
                    for session in sessions {
                        for boot in [false, true] {
                            let seen = SlotSeen {
                                state,
                                window,
                                leased,
                                session,
                                boot,
                            };
                            let d = decide_slot(seen);
                            let live_session = matches!(
                                session,
                                Some(
                                    SessionState::Running
                                        | SessionState::Spawning
                                        | SessionState::Saved
                                )
                            );
                            // A slot a live session runs in is never touched.
                            if state == SlotState::Used && live_session {
                                assert_eq!(d, SlotDecision::Keep, "{seen:?}");
                            }
                            // The slots of an open window under a healthy lease are untouched.
                            if window == WindowSeen::Open
                                && (state == SlotState::Free
                                    || (state == SlotState::Leased && leased))
                            {
                                assert_eq!(d, SlotDecision::Keep, "{seen:?}");
                            }
                            // Only a provisioning slot at boot is half-made.
                            assert_eq!(
                                d == SlotDecision::RemoveHalfMade,
                                state == SlotState::Provisioning && boot,
                                "{seen:?}"
                            );
                            // Retiring is only for a used slot whose session ended.
                            if d == SlotDecision::Retire {
                                assert!(state == SlotState::Used && !live_session, "{seen:?}");
                            }
                            // Retired slots stay retired.
                            if state == SlotState::Retired {
                                assert_eq!(d, SlotDecision::Keep, "{seen:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn slots() {
        let seen = |state, window, leased| SlotSeen {
            state,
            window,
            leased,
            session: None,
            boot: false,
        };
        use SlotDecision::*;
        assert_eq!(
            decide_slot(seen(SlotState::Free, WindowSeen::Gone, false)),
            Release
        );
        assert_eq!(
            decide_slot(seen(SlotState::Free, WindowSeen::Closing, false)),
            Release
        );
        assert_eq!(
            decide_slot(seen(SlotState::Leased, WindowSeen::Open, false)),
            Release
        );
        assert_eq!(
            decide_slot(seen(SlotState::Leased, WindowSeen::Closing, true)),
            Release
        );
        assert_eq!(
            decide_slot(seen(SlotState::Used, WindowSeen::Open, true)),
            Retire
        );
    }

    #[test]
    fn releases() {
        use ReleaseDecision::*;
        let wt = |exists, clean, at_base| WorktreeSeen {
            exists,
            clean,
            at_base,
        };
        for window in [WindowSeen::Open, WindowSeen::Closing, WindowSeen::Gone] {
            assert_eq!(decide_release(window, wt(false, true, true)), Forget);
            // Work is never removed, whatever the window.
            assert_eq!(
                decide_release(window, wt(true, false, true)),
                PreserveAndRetire
            );
            assert_eq!(
                decide_release(window, wt(true, true, false)),
                PreserveAndRetire
            );
        }
        assert_eq!(
            decide_release(WindowSeen::Open, wt(true, true, true)),
            ReturnToPool
        );
        assert_eq!(
            decide_release(WindowSeen::Closing, wt(true, true, true)),
            Remove
        );
        assert_eq!(
            decide_release(WindowSeen::Gone, wt(true, true, true)),
            Remove
        );
    }

    #[test]
    fn windows_and_provisioning() {
        assert_eq!(
            decide_window(WindowState::Closing, 0),
            WindowDecision::MarkClosed
        );
        assert_eq!(decide_window(WindowState::Closing, 1), WindowDecision::Keep);
        assert_eq!(decide_window(WindowState::Open, 0), WindowDecision::Keep);
        let mut w = Window {
            id: WindowId::parse("w1").unwrap(),
            name: None,
            repo: "/r".into(),
            state: WindowState::Open,
            target: 4,
            created_at_ms: 0,
        };
        assert_eq!(slots_to_provision(&w, 0, 0), 4);
        assert_eq!(slots_to_provision(&w, 1, 2), 1);
        assert_eq!(slots_to_provision(&w, 5, 0), 0);
        w.state = WindowState::Closing;
        assert_eq!(slots_to_provision(&w, 0, 0), 0);
    }

    #[test]
    fn ids_and_states_parse() {
        assert!(WindowId::parse("w-1").is_ok());
        assert!(WindowId::parse("W1").is_err());
        assert!(SlotId::parse("").is_err());
        for s in ["provisioning", "free", "leased", "used", "retired"] {
            assert_eq!(s.parse::<SlotState>().unwrap().as_str(), s);
        }
        assert!("gone".parse::<WindowState>().is_err());
        assert_eq!(
            SlotId::parse("ab").unwrap().branch(),
            "reconcile/slot-ab".to_owned()
        );
    }
}
