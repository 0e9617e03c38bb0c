//! The pure core of Reconcile: what a session is, what the probes saw, and what to do about it.
//!
//! Nothing in this crate performs IO or reads a clock. Adapters (tmux, git, SQLite, /proc) turn
//! the world into the snapshot types defined here; the functions here turn snapshots into
//! decisions. `tests/tidy.rs` enforces the boundary.

mod classify;
mod error;
mod evidence;
mod model;
mod orphan;
mod pool;
mod report;
mod takeover;

pub use classify::{Disposition, StopOutcome, classify};
pub use error::Error;
pub use evidence::{
    Evidence, Marker, ProcessObservation, Snapshot, TmuxListing, TmuxProbe, TmuxSession, evidence,
};
pub use model::{
    OwnerMarker, ProcessIdentity, Runtime, RuntimeKind, Secret, Session, SessionId, SessionState,
    TmuxHandle,
};
pub use orphan::{OrphanCounts, OrphanDecision, decide_orphan};
pub use pool::{
    Lease, LeaseDecision, LeaseId, LeaseReap, PoolCounts, ReleaseDecision, Slot, SlotDecision,
    SlotId, SlotSeen, SlotState, Window, WindowDecision, WindowId, WindowSeen, WindowState,
    WorktreeSeen, decide_lease, decide_release, decide_slot, decide_window, slots_to_provision,
};
pub use report::{Count, MAX_WARNINGS, Pass, PassReport, Report, Warning, WarningCode};
pub use takeover::{
    HealthSeen, PortSeen, ReadySeen, RefuseBecause, ReplaceBecause, RunFacts, RunFileSeen,
    TakeoverPlan, TakeoverSeen, plan_daemon_takeover,
};
