//! Acting on a session's runtime (tmux or a local process): completing a handle from a probe and
//! stopping it. Shared by the reap pass and a user's stop, so both classify the same outcomes.

use std::time::Duration;

use reconcile_core::{Runtime, StopOutcome, TmuxHandle, TmuxProbe};
use reconcile_tmux::Destroyed;

use crate::host::Host;

/// How long a local process gets between SIGTERM and SIGKILL.
const PROCESS_GRACE: Duration = Duration::from_secs(5);

/// The runtime as it should be recorded: a tmux handle that only named its session gets the
/// id, server and pane the probe saw. Only call this once the evidence proved the session ours
/// (for a name-only handle, by its ownership marker).
pub(crate) fn recorded(runtime: &Runtime, tmux: &TmuxProbe) -> Runtime {
    match (runtime, tmux) {
        (Runtime::Tmux(handle), TmuxProbe::Listing(listing)) if !handle.is_recorded() => {
            match listing.session(&handle.name) {
                Some(found) => Runtime::Tmux(TmuxHandle {
                    name: handle.name.clone(),
                    id: Some(found.id.clone()),
                    server: listing.server.clone(),
                    pane: found.pane.clone(),
                }),
                None => runtime.clone(),
            }
        }
        _ => runtime.clone(),
    }
}

/// Stop a runtime. `NotFound` is typed: the server answered without it, no server runs, or the
/// recorded process is gone (or its pid is someone else's now, who was not touched). Any other
/// failure is `Failed` with a message safe to show.
pub(crate) fn stop(host: &Host, runtime: &Runtime) -> (StopOutcome, Option<String>) {
    let result = match runtime {
        Runtime::Tmux(handle) => host
            .tmux
            .destroy(handle)
            .map(|d| d == Destroyed::Destroyed)
            .map_err(|e| e.to_string()),
        Runtime::Process(Some(identity)) => {
            reconcile_proc::stop_process(&host.boot_id, identity, PROCESS_GRACE)
                .map(|s| s == reconcile_proc::Stopped::Exited)
                .map_err(|e| e.to_string())
        }
        Runtime::Process(None) | Runtime::Remote { .. } | Runtime::Unreadable(_) => {
            Err("nothing local is recorded to stop".to_owned())
        }
    };
    match result {
        Ok(true) => (StopOutcome::Stopped, None),
        Ok(false) => (StopOutcome::NotFound, None),
        Err(message) => (StopOutcome::Failed, Some(message)),
    }
}
