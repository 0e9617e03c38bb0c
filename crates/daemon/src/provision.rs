//! The provisioner: keeps every open window's pool at its target, one slot at a time, on its own
//! database connection so a slow `git worktree add` holds up no request. It starts only after the
//! boot reconcile, so the pool pass always runs before any provisioning.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reconcile_core::WindowId;
use reconcile_store::Store;

use crate::serve::now_ms;
use crate::state::State;
use crate::windows::announce;

/// How often the provisioner looks at the pools when nothing woke it.
const TICK: Duration = Duration::from_secs(2);
/// The longest a window whose provisioning keeps failing waits before the next attempt.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Windows whose provisioning failed, and when to try each again.
type Backoff = HashMap<WindowId, (u32, Instant)>;

pub async fn run(state: Arc<State>, store: Store) {
    let store = Arc::new(Mutex::new(store));
    let backoff = Arc::new(Mutex::new(Backoff::new()));
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = state.provision.notified() => {}
            _ = tick.tick() => {}
            () = state.stopped() => return,
        }
        if !state.is_ready() || state.is_stopping() {
            continue;
        }
        let (s, store, backoff) = (state.clone(), store.clone(), backoff.clone());
        let done = tokio::task::spawn_blocking(move || {
            let store = store.lock().unwrap_or_else(|p| p.into_inner());
            let mut backoff = backoff.lock().unwrap_or_else(|p| p.into_inner());
            fill(&s, &store, &mut backoff);
        })
        .await;
        if let Err(e) = done {
            tracing::error!(error = %e, "the provisioner panicked; it tries again at its next tick");
        }
    }
}

/// Provision until every open window has its target of free slots, or a stop is requested.
fn fill(state: &State, store: &Store, backoff: &mut Backoff) {
    loop {
        if state.is_stopping() {
            return;
        }
        let plan = match reconcile_engine::provisioning_plan(store) {
            Ok(plan) => plan,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the pools to provision");
                return;
            }
        };
        let now = Instant::now();
        let Some((window, wanted)) = plan
            .into_iter()
            .find(|(w, _)| backoff.get(&w.id).is_none_or(|(_, until)| *until <= now))
        else {
            return;
        };
        match reconcile_engine::provision_slot(store, &state.host, &window, now_ms()) {
            Ok(slot) => {
                backoff.remove(&window.id);
                tracing::debug!(window = %window.id, slot = %slot.id, still_wanted = wanted - 1, "provisioned");
                announce(state, &window.id);
            }
            Err(e) => {
                let failures = backoff.get(&window.id).map_or(1, |(n, _)| n + 1);
                let wait = Duration::from_secs(1 << failures.min(6)).min(MAX_BACKOFF);
                tracing::warn!(window = %window.id, error = %e, failures, retry_in_s = wait.as_secs(), "could not provision a slot");
                backoff.insert(window.id.clone(), (failures, now + wait));
            }
        }
    }
}
