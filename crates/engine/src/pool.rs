//! The pool pass (LEAK-003): leases, then slots, then windows, decided by
//! `reconcile_core::{decide_lease, decide_slot, decide_release, decide_window}` and carried out
//! here. It runs after the session passes (so session states are current) and before any
//! provisioning, at boot and on every sweep. Running it twice changes nothing the second time.

use std::collections::{HashMap, HashSet};

use reconcile_core::{
    LeaseDecision, Pass, PoolCounts, ReleaseDecision, SessionState, Slot, SlotDecision, SlotId,
    SlotSeen, SlotState, Warning, WarningCode, WindowDecision, WindowId, WindowSeen, WindowState,
    decide_lease, decide_release, decide_slot, decide_window,
};
use reconcile_git::Preserved;
use reconcile_store::Store;

use crate::Error;
use crate::host::Host;
use reconcile_proc::failpoint;

/// Reconcile every lease, slot and window. `boot`: no provisioning can be in flight, so a
/// `provisioning` slot is half-made. Failures are warnings; the thing is left as it was.
pub fn pool_pass(
    store: &Store,
    host: &Host,
    now_ms: i64,
    boot: bool,
    warnings: &mut Vec<Warning>,
) -> PoolCounts {
    let mut counts = PoolCounts::default();
    let mut warn = |counts: &mut PoolCounts, message: String| {
        counts.failed += 1;
        tracing::warn!(message = %message, "pool pass could not act");
        warnings.push(Warning {
            pass: Pass::Pool,
            session: None,
            code: WarningCode::PoolFailed,
            message,
        });
    };
    let read = (|| {
        Ok::<_, Error>((
            store.leases()?,
            store.slots()?,
            store.windows()?,
            store.pool_session_states()?,
        ))
    })();
    let (leases, slots, windows, sessions) = match read {
        Ok(read) => read,
        Err(e) => {
            warn(&mut counts, format!("cannot read the pool: {e}"));
            return counts;
        }
    };
    if leases.is_empty() && slots.is_empty() && windows.is_empty() {
        return counts;
    }

    // Leases first: which slots are still held after this pass.
    let mut held: HashSet<SlotId> = HashSet::new();
    counts.leases = leases.len() as u64;
    for lease in &leases {
        let session = lease
            .session
            .as_ref()
            .and_then(|s| sessions.get(s))
            .copied();
        let decision = decide_lease(lease, session, now_ms);
        let done = match decision {
            LeaseDecision::Keep => Ok(()),
            LeaseDecision::Renew => store.renew_lease(&lease.id, now_ms).map(drop),
            LeaseDecision::Reap(why) => {
                tracing::info!(lease = %lease.id, slot = %lease.slot, owner = %lease.owner, reason = ?why, "reaping a lease");
                store.delete_lease(&lease.id).map(drop)
            }
        };
        match done {
            Ok(()) => {
                counts.lease(decision);
                if !matches!(decision, LeaseDecision::Reap(_)) {
                    held.insert(lease.slot.clone());
                }
            }
            Err(e) => {
                held.insert(lease.slot.clone());
                warn(&mut counts, format!("lease {}: {e}", lease.id));
            }
        }
    }
    failpoint::hit("pool.after_leases");

    // Then slots, knowing which leases survived.
    let window_states: HashMap<WindowId, WindowState> =
        windows.iter().map(|w| (w.id.clone(), w.state)).collect();
    counts.slots = slots.len() as u64;
    for slot in &slots {
        let window = WindowSeen::of(
            slot.window
                .as_ref()
                .and_then(|w| window_states.get(w))
                .copied(),
        );
        let seen = SlotSeen {
            state: slot.state,
            window,
            leased: held.contains(&slot.id),
            session: slot.session.as_ref().and_then(|s| sessions.get(s)).copied(),
            boot,
        };
        let decision = decide_slot(seen);
        let result = match decision {
            SlotDecision::Keep => {
                counts.slots_kept += 1;
                Ok(())
            }
            SlotDecision::RemoveHalfMade => remove_half_made(store, host, slot).map(|()| {
                counts.slots_half_made_removed += 1;
            }),
            SlotDecision::Release => {
                release(store, host, slot, window, &leases, now_ms).map(|d| match d {
                    ReleaseDecision::ReturnToPool => counts.slots_returned += 1,
                    ReleaseDecision::Remove | ReleaseDecision::Forget => counts.slots_removed += 1,
                    ReleaseDecision::PreserveAndRetire => counts.slots_retired += 1,
                })
            }
            SlotDecision::Retire => retire(store, host, slot, &sessions, now_ms).map(|()| {
                counts.slots_retired += 1;
            }),
        };
        if let Err(e) = result {
            warn(
                &mut counts,
                format!("slot {} ({}): {e}", slot.id, slot.worktree.display()),
            );
        }
    }

    // Then windows: a closing window with nothing left in its pool is closed.
    let live: Vec<Slot> = match store.slots() {
        Ok(slots) => slots,
        Err(e) => {
            warn(&mut counts, format!("cannot read the slots again: {e}"));
            return counts;
        }
    };
    for window in windows.iter().filter(|w| w.state == WindowState::Closing) {
        let left = live
            .iter()
            .filter(|s| s.window.as_ref() == Some(&window.id) && s.state != SlotState::Retired)
            .count();
        if decide_window(window.state, left) == WindowDecision::MarkClosed {
            match store.set_window_state(&window.id, WindowState::Closed, now_ms) {
                Ok(_) => {
                    tracing::info!(window = %window.id, "window closed");
                    counts.windows_closed += 1;
                }
                Err(e) => warn(&mut counts, format!("window {}: {e}", window.id)),
            }
        }
    }
    counts
}

/// A provisioning slot found at boot: remove its (partial) worktree, its unmoved branch, its row.
fn remove_half_made(store: &Store, host: &Host, slot: &Slot) -> Result<(), Error> {
    let removed = host.git.remove_half_made(&slot.repo, &slot.worktree)?;
    host.git
        .delete_branch_at(&slot.repo, &slot.branch, &slot.base)?;
    store.delete_slot(&slot.id)?;
    tracing::info!(slot = %slot.id, worktree = %slot.worktree.display(), removed = ?removed, "removed a half-made slot");
    Ok(())
}

/// Nobody holds `slot` any more: drop what leases remain on it, look at its worktree, and
/// return it to the pool, remove it, or preserve its work and retire it.
pub(crate) fn release(
    store: &Store,
    host: &Host,
    slot: &Slot,
    window: WindowSeen,
    leases: &[reconcile_core::Lease],
    now_ms: i64,
) -> Result<ReleaseDecision, Error> {
    for lease in leases.iter().filter(|l| l.slot == slot.id) {
        store.delete_lease(&lease.id)?;
    }
    let seen = host.git.inspect(&slot.worktree, &slot.base)?;
    let decision = decide_release(window, seen);
    match decision {
        ReleaseDecision::ReturnToPool => {
            store.set_slot_state(
                &slot.id,
                &[SlotState::Leased, SlotState::Free],
                SlotState::Free,
                now_ms,
            )?;
        }
        ReleaseDecision::Remove => {
            host.git.remove_worktree(&slot.repo, &slot.worktree)?;
            failpoint::hit("pool.after_remove_worktree");
            host.git
                .delete_branch_at(&slot.repo, &slot.branch, &slot.base)?;
            store.delete_slot(&slot.id)?;
        }
        ReleaseDecision::Forget => {
            host.git
                .delete_branch_at(&slot.repo, &slot.branch, &slot.base)?;
            store.delete_slot(&slot.id)?;
        }
        ReleaseDecision::PreserveAndRetire => {
            let label = format!("slot {}", slot.id);
            let preserved =
                host.git
                    .preserve_as(&slot.worktree, &slot.id.preserved_ref(), &label)?;
            if let Preserved::Saved { reference, .. } = &preserved {
                tracing::info!(slot = %slot.id, reference = %reference, "a released slot held work; preserved");
            }
            store.set_slot_state(
                &slot.id,
                &[SlotState::Leased, SlotState::Free],
                SlotState::Retired,
                now_ms,
            )?;
        }
    }
    tracing::info!(slot = %slot.id, decision = ?decision, "released a slot");
    Ok(decision)
}

/// The session of a used slot ended: the slot leaves the pool and its worktree stays. A session
/// that ended through Reconcile had its work preserved already; a slot whose session has no row
/// gets its work preserved here first.
fn retire(
    store: &Store,
    host: &Host,
    slot: &Slot,
    sessions: &HashMap<reconcile_core::SessionId, SessionState>,
    now_ms: i64,
) -> Result<(), Error> {
    let has_row = slot
        .session
        .as_ref()
        .is_some_and(|s| sessions.contains_key(s));
    if !has_row {
        host.git.preserve_as(
            &slot.worktree,
            &slot.id.preserved_ref(),
            &format!("slot {}", slot.id),
        )?;
    }
    store.set_slot_state(&slot.id, &[SlotState::Used], SlotState::Retired, now_ms)?;
    tracing::info!(slot = %slot.id, session = ?slot.session, "retired a slot whose session ended");
    Ok(())
}
