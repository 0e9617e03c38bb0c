//! JSON shapes of windows, their slots and leases.

use reconcile_core::{Lease, ReleaseDecision, Slot, SlotState, Window, WindowState};
use serde::{Deserialize, Serialize};

/// `POST /v1/windows`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenWindow {
    pub repo: String,
    /// How many warm slots to keep ready.
    pub slots: u32,
    #[serde(default)]
    pub name: Option<String>,
}

/// `POST /v1/windows/{id}/leases`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcquireLease {
    /// Who holds it: any non-empty name the holder recognises.
    pub owner: String,
    /// How long the lease lives without a renewal (default 60 000).
    #[serde(default)]
    pub ttl_ms: Option<i64>,
}

/// One window: its pool as the contract lists it (`slots` are the free, leased and used ones).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowView {
    pub id: String,
    pub name: Option<String>,
    pub repo: String,
    pub state: WindowState,
    /// How many free slots the pool keeps ready.
    pub target: u32,
    pub slots: Vec<SlotView>,
    /// Slots being made right now.
    pub provisioning: u32,
    /// Slots out of the pool for good, their worktrees kept for the work in them.
    pub retired: u32,
    pub created_at_ms: i64,
}

/// One slot of a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotView {
    pub id: String,
    /// `free`, `leased` or `used`.
    pub state: SlotState,
    pub worktree: String,
    pub branch: String,
    /// The session running in it, for `used` slots.
    pub session: Option<String>,
    pub lease: Option<LeaseView>,
}

/// A lease: what its holder needs to work in the slot and to renew it in time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseView {
    pub id: String,
    pub slot: String,
    pub owner: String,
    pub session: Option<String>,
    pub heartbeat_ms: i64,
    pub ttl_ms: i64,
    /// When it is reaped unless renewed first.
    pub expires_at_ms: i64,
    pub acquired_ms: i64,
    /// The slot's worktree and branch.
    pub worktree: Option<String>,
    pub branch: Option<String>,
}

impl LeaseView {
    pub fn new(lease: &Lease, slot: Option<&Slot>) -> LeaseView {
        LeaseView {
            id: lease.id.to_string(),
            slot: lease.slot.to_string(),
            owner: lease.owner.clone(),
            session: lease.session.as_ref().map(ToString::to_string),
            heartbeat_ms: lease.heartbeat_ms,
            ttl_ms: lease.ttl_ms,
            expires_at_ms: lease.heartbeat_ms.saturating_add(lease.ttl_ms),
            acquired_ms: lease.acquired_ms,
            worktree: slot.map(|s| s.worktree.display().to_string()),
            branch: slot.map(|s| s.branch.clone()),
        }
    }
}

impl WindowView {
    /// The view of `window`; `slots` and `leases` may hold other windows' too.
    pub fn new(window: &Window, slots: &[Slot], leases: &[Lease]) -> WindowView {
        let mine: Vec<&Slot> = slots
            .iter()
            .filter(|s| s.window.as_ref() == Some(&window.id))
            .collect();
        let count = |state| mine.iter().filter(|s| s.state == state).count() as u32;
        WindowView {
            id: window.id.to_string(),
            name: window.name.clone(),
            repo: window.repo.display().to_string(),
            state: window.state,
            target: window.target,
            slots: mine
                .iter()
                .filter(|s| {
                    matches!(
                        s.state,
                        SlotState::Free | SlotState::Leased | SlotState::Used
                    )
                })
                .map(|s| SlotView {
                    id: s.id.to_string(),
                    state: s.state,
                    worktree: s.worktree.display().to_string(),
                    branch: s.branch.clone(),
                    session: s.session.as_ref().map(ToString::to_string),
                    lease: leases
                        .iter()
                        .find(|l| l.slot == s.id)
                        .map(|l| LeaseView::new(l, Some(s))),
                })
                .collect(),
            provisioning: count(SlotState::Provisioning),
            retired: count(SlotState::Retired),
            created_at_ms: window.created_at_ms,
        }
    }

    /// Slots ready to hand out.
    pub fn free(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::Free)
            .count()
    }
}

/// `POST /v1/leases/{id}/release`: what became of the slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Released {
    pub lease: String,
    pub slot: String,
    pub decision: ReleaseDecision,
}
