//! Windows and their warm pools: open, provision one slot at a time, close; leases for outside
//! owners (acquire, renew, release). Sessions take slots in `session::create_session`.

use std::path::Path;

use reconcile_core::{
    Lease, LeaseId, ReleaseDecision, Slot, SlotId, SlotState, Warning, Window, WindowId,
    WindowSeen, WindowState, slots_to_provision,
};
use reconcile_store::Store;

use crate::Error;
use crate::host::{Host, new_id};
use crate::pool::{pool_pass, release};
use reconcile_proc::failpoint;

/// The most warm slots one window keeps.
pub const MAX_SLOTS: u32 = 64;
/// Lease TTLs an outside owner may ask for.
pub const MIN_TTL_MS: i64 = 1_000;
pub const MAX_TTL_MS: i64 = 24 * 60 * 60 * 1000;
/// An outside owner's lease lives this long without a renewal unless it asks otherwise.
pub const DEFAULT_TTL_MS: i64 = 60_000;
/// The leases the daemon holds for its sessions; renewed every quarter of this.
pub const SESSION_LEASE_TTL_MS: i64 = 60_000;

/// Open a window on `repo` keeping `slots` warm slots. Provisioning happens afterwards, in the
/// background ([`provision_slot`]); the window is returned at once.
pub fn open_window(
    store: &Store,
    host: &Host,
    repo: &Path,
    name: Option<String>,
    slots: u32,
    now_ms: i64,
) -> Result<Window, Error> {
    if !(1..=MAX_SLOTS).contains(&slots) {
        return Err(Error::InvalidSlots {
            given: slots,
            max: MAX_SLOTS,
        });
    }
    if !repo.exists() {
        return Err(Error::NoSuchRepository {
            path: repo.to_owned(),
        });
    }
    let repo = host.git.repository_root(repo)?;
    host.git.base_commit(&repo)?;
    let window = Window {
        id: WindowId::parse(&new_id()?).expect("generated ids are valid"),
        name,
        repo,
        state: WindowState::Open,
        target: slots,
        created_at_ms: now_ms,
    };
    store.insert_window(&window)?;
    tracing::info!(window = %window.id, repo = %window.repo.display(), slots, "window opened");
    Ok(window)
}

/// The open windows that need slots, and how many each.
pub fn provisioning_plan(store: &Store) -> Result<Vec<(Window, u32)>, Error> {
    let slots = store.slots()?;
    Ok(store
        .windows()?
        .into_iter()
        .filter_map(|w| {
            let count = |state| {
                slots
                    .iter()
                    .filter(|s| s.window.as_ref() == Some(&w.id) && s.state == state)
                    .count()
            };
            let n = slots_to_provision(&w, count(SlotState::Free), count(SlotState::Provisioning));
            (n > 0).then_some((w, n))
        })
        .collect())
}

/// Make one warm slot for `window`: the `provisioning` row first, then the worktree on a fresh
/// branch at the repository's HEAD, then `free`. A failure removes what this call made; a crash
/// leaves a `provisioning` row that the next boot's pool pass removes with what it made.
pub fn provision_slot(
    store: &Store,
    host: &Host,
    window: &Window,
    now_ms: i64,
) -> Result<Slot, Error> {
    let id = SlotId::parse(&new_id()?).expect("generated ids are valid");
    let base = host.git.base_commit(&window.repo)?;
    let mut slot = Slot {
        window: Some(window.id.clone()),
        repo: window.repo.clone(),
        worktree: host.home.slot_worktree(id.as_str()),
        branch: id.branch(),
        base,
        state: SlotState::Provisioning,
        session: None,
        updated_at_ms: now_ms,
        id,
    };
    store.insert_slot(&slot)?;
    failpoint::hit("pool.after_row");
    if let Err(e) = host
        .git
        .add_worktree_at(&slot.repo, &slot.branch, &slot.worktree, &slot.base)
    {
        undo_provisioning(store, host, &slot);
        return Err(e.into());
    }
    failpoint::hit("pool.after_worktree");
    if !store.set_slot_state(
        &slot.id,
        &[SlotState::Provisioning],
        SlotState::Free,
        now_ms,
    )? {
        return Err(Error::SlotVanished { id: slot.id });
    }
    slot.state = SlotState::Free;
    tracing::info!(window = %window.id, slot = %slot.id, "slot provisioned");
    Ok(slot)
}

fn undo_provisioning(store: &Store, host: &Host, slot: &Slot) {
    let undone = (|| -> Result<(), Error> {
        host.git.remove_half_made(&slot.repo, &slot.worktree)?;
        host.git
            .delete_branch_at(&slot.repo, &slot.branch, &slot.base)?;
        store.delete_slot(&slot.id)?;
        Ok(())
    })();
    if let Err(e) = undone {
        tracing::error!(slot = %slot.id, error = %e, "could not undo a failed provisioning; the next boot removes it");
    }
}

/// Close a window: release its leases, remove its unused clean slots; slots holding a session's
/// work stay until that session ends. Closing a closed window changes nothing.
pub fn close_window(
    store: &Store,
    host: &Host,
    id: &WindowId,
    now_ms: i64,
) -> Result<(Window, Vec<Warning>), Error> {
    let window = store
        .window(id)?
        .ok_or_else(|| Error::NoSuchWindow { id: id.clone() })?;
    if window.state == WindowState::Open {
        store.set_window_state(id, WindowState::Closing, now_ms)?;
        failpoint::hit("window.after_closing");
    }
    let mut warnings = Vec::new();
    pool_pass(store, host, now_ms, false, &mut warnings);
    let window = store
        .window(id)?
        .ok_or_else(|| Error::NoSuchWindow { id: id.clone() })?;
    tracing::info!(window = %id, state = %window.state, "window close requested");
    Ok((window, warnings))
}

/// An outside owner takes a free slot of `window` under a lease it must renew within `ttl_ms`.
pub fn acquire_lease(
    store: &Store,
    window: &WindowId,
    owner: &str,
    ttl_ms: Option<i64>,
    now_ms: i64,
) -> Result<(Lease, Slot), Error> {
    let owner = owner.trim();
    if owner.is_empty() || owner.len() > 200 {
        return Err(Error::InvalidOwner);
    }
    let ttl_ms = ttl_ms.unwrap_or(DEFAULT_TTL_MS);
    if !(MIN_TTL_MS..=MAX_TTL_MS).contains(&ttl_ms) {
        return Err(Error::InvalidTtl {
            given: ttl_ms,
            min: MIN_TTL_MS,
            max: MAX_TTL_MS,
        });
    }
    open_window_row(store, window)?;
    let lease = Lease {
        id: LeaseId::parse(&new_id()?).expect("generated ids are valid"),
        slot: SlotId::parse("pending").expect("a valid id"),
        owner: owner.to_owned(),
        session: None,
        heartbeat_ms: now_ms,
        ttl_ms,
        acquired_ms: now_ms,
    };
    let taken = store
        .take_slot(window, lease, None, now_ms)?
        .ok_or_else(|| Error::NoFreeSlot {
            window: window.clone(),
        })?;
    tracing::info!(window = %window, slot = %taken.slot.id, lease = %taken.lease.id, owner, "lease acquired");
    Ok((taken.lease, taken.slot))
}

/// The window's row if it is open; otherwise why not.
pub(crate) fn open_window_row(store: &Store, id: &WindowId) -> Result<Window, Error> {
    let window = store
        .window(id)?
        .ok_or_else(|| Error::NoSuchWindow { id: id.clone() })?;
    if window.state != WindowState::Open {
        return Err(Error::WindowNotOpen {
            id: id.clone(),
            state: window.state,
        });
    }
    Ok(window)
}

/// An outside lease that is neither the daemon's (for a session) nor gone.
fn outside_lease(store: &Store, id: &LeaseId) -> Result<Lease, Error> {
    let lease = store
        .lease(id)?
        .ok_or_else(|| Error::NoSuchLease { id: id.clone() })?;
    if let Some(session) = lease.session {
        return Err(Error::SessionLease {
            id: id.clone(),
            session,
        });
    }
    Ok(lease)
}

/// Renew an outside lease. A reaped lease is gone: its owner learns it here (not found).
pub fn renew_lease(store: &Store, id: &LeaseId, now_ms: i64) -> Result<Lease, Error> {
    outside_lease(store, id)?;
    if !store.renew_lease(id, now_ms)? {
        return Err(Error::NoSuchLease { id: id.clone() });
    }
    store
        .lease(id)?
        .ok_or_else(|| Error::NoSuchLease { id: id.clone() })
}

/// Release an outside lease: its slot returns to the pool if it holds nothing, and otherwise
/// has its work preserved and is retired.
pub fn release_lease(
    store: &Store,
    host: &Host,
    id: &LeaseId,
    now_ms: i64,
) -> Result<(Slot, ReleaseDecision), Error> {
    let lease = outside_lease(store, id)?;
    let slot = store
        .slot(&lease.slot)?
        .ok_or_else(|| Error::NoSuchLease { id: id.clone() })?;
    let window = WindowSeen::of(
        slot.window
            .as_ref()
            .map(|w| store.window(w))
            .transpose()?
            .flatten()
            .map(|w| w.state),
    );
    let decision = release(store, host, &slot, window, &[lease], now_ms)?;
    let slot = store.slot(&slot.id)?.unwrap_or(slot);
    tracing::info!(lease = %id, slot = %slot.id, decision = ?decision, "lease released");
    Ok((slot, decision))
}
