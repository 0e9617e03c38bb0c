//! The session lifecycle: create (row first, then worktree, then tmux, then running), stop
//! (runtime, then work, then row), and saving every session for a clean shutdown.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reconcile_core::{
    Disposition, Evidence, Lease, LeaseId, OwnerMarker, Runtime, Secret, Session, SessionId,
    SessionState, SlotId, StopOutcome, TmuxHandle, WindowId, classify, evidence,
};
use reconcile_git::Preserved;
use reconcile_store::{NewSession, Store};
use reconcile_tmux::Create;

use crate::Error;
use crate::host::{Host, now_ms};
use crate::runtime;
use crate::window;
use reconcile_proc::failpoint;

/// What a caller asks for when starting a session.
#[derive(Clone, Debug)]
pub struct NewSessionRequest {
    pub repo: PathBuf,
    pub name: Option<String>,
    pub command: Vec<String>,
    pub resume_token: Option<Secret>,
    /// Take a warm slot of this window instead of creating a worktree. `repo` may then be empty.
    pub window: Option<WindowId>,
}

/// Start a session: validate, write the `spawning` row, create the worktree on a new branch,
/// start the tmux session with the ownership marker and resume token, mark it running.
///
/// Bad input is refused before anything is made. A failure after the row exists ends the row
/// `terminated` with the reason and leaves no tmux session behind; the worktree is kept.
pub fn create_session(
    store: &Store,
    host: &Host,
    request: NewSessionRequest,
) -> Result<Session, Error> {
    let program = request.command.first().ok_or(Error::EmptyCommand)?;
    resolve_program(program)?;
    let given_repo = if request.repo.as_os_str().is_empty() && request.window.is_some() {
        None
    } else if !request.repo.exists() {
        return Err(Error::NoSuchRepository { path: request.repo });
    } else {
        Some(host.git.repository_root(&request.repo)?)
    };

    let id = new_session_id()?;
    let name = id.tmux_name();
    let end = |reason: String| {
        if let Err(e) = store.terminate(&id, &reason, None, now_ms()) {
            tracing::error!(session = %id, error = %e, "could not end a session whose create failed");
        }
    };
    let mut new = NewSession {
        id: id.clone(),
        name: request.name,
        repo: given_repo.clone().unwrap_or_default(),
        branch: id.branch(),
        worktree: host.home.worktrees().join(id.as_str()),
        runtime: Runtime::Tmux(TmuxHandle::intent(name.clone())),
        command: request.command.clone(),
        resume_token: request.resume_token.clone(),
    };
    let (repo, worktree) = match &request.window {
        // A warm slot: the slot, its lease and the row in one transaction; no worktree to make.
        Some(window_id) => {
            let window = window::open_window_row(store, window_id)?;
            if let Some(given) = given_repo.filter(|given| *given != window.repo) {
                return Err(Error::WrongRepository {
                    window: window_id.clone(),
                    given,
                    repo: window.repo,
                });
            }
            new.repo = window.repo.clone();
            let lease = session_lease(&id)?;
            let taken = store
                .take_slot(window_id, lease, Some(&new), now_ms())?
                .ok_or_else(|| Error::NoFreeSlot {
                    window: window_id.clone(),
                })?;
            failpoint::hit("create.after_row");
            (window.repo, taken.slot.worktree)
        }
        None => {
            let repo = new.repo.clone();
            let worktree = new.worktree.clone();
            store.insert_spawning(&new, now_ms())?;
            failpoint::hit("create.after_row");
            if let Err(e) = host.git.add_worktree(&repo, &id.branch(), &worktree) {
                end(format!("could not create its worktree: {e}"));
                return Err(e.into());
            }
            failpoint::hit("create.after_worktree");
            (repo, worktree)
        }
    };

    let marker = OwnerMarker {
        instance: host.instance_id.clone(),
        session: id.clone(),
    };
    let created = host.tmux.create(&Create {
        name: &name,
        dir: &worktree,
        command: &request.command,
        marker: &marker,
        resume_token: request.resume_token.as_ref(),
    });
    let handle = match created {
        Ok(handle) => handle,
        Err(e) => {
            end(format!("could not start its tmux session: {e}"));
            return Err(e.into());
        }
    };
    failpoint::hit("create.after_tmux");

    if let Err(e) = store.mark_running(&id, &Runtime::Tmux(handle.clone()), now_ms()) {
        // Leave nothing running that the store does not know about.
        if let Err(destroy) = host.tmux.destroy(&handle) {
            tracing::error!(session = %id, error = %destroy, "could not destroy the tmux session of a failed create");
        }
        end(format!("could not record it as running: {e}"));
        return Err(e.into());
    }
    tracing::info!(session = %id, repo = %repo.display(), "session started");
    Ok(store
        .get(&id)?
        .ok_or(reconcile_store::Error::NotFound { id })?)
}

/// Stop a session: destroy its runtime, capture its uncommitted work, mark it terminated. The
/// worktree stays. Stopping a terminated session returns it as it is.
pub fn stop_session(store: &Store, host: &Host, id: &SessionId) -> Result<Session, Error> {
    let session = store
        .get(id)?
        .ok_or_else(|| Error::NoSuchSession { id: id.clone() })?;
    match session.state {
        SessionState::Terminated => return Ok(session),
        SessionState::Running => {}
        state @ (SessionState::Spawning | SessionState::Saved) => {
            return Err(Error::CannotStop {
                id: id.clone(),
                state,
            });
        }
    }
    let runtime = complete(host, &session);
    let (outcome, error) = runtime::stop(host, &runtime);
    failpoint::hit("stop.after_destroy");
    if outcome != StopOutcome::Failed {
        // Its tmux session is gone; what it started and detached goes too, before its work is
        // captured, so the capture is not racing a running process.
        let mut warnings = Vec::new();
        let ending = std::collections::HashSet::from([id.clone()]);
        let counts = crate::orphans::reap_sessions(host, &ending, &mut warnings).counts;
        for w in &warnings {
            tracing::warn!(session = %id, message = %w.message, "orphan of a stopped session survived");
        }
        tracing::debug!(session = %id, reaped = counts.reaped(), "reaped the stopped session's processes");
    }
    let seen = match outcome {
        StopOutcome::Stopped => Evidence::Alive,
        StopOutcome::NotFound => Evidence::ConfirmedDead,
        StopOutcome::Failed => Evidence::Unknown,
    };
    match classify(session.state, seen, Some(outcome)) {
        Disposition::PreserveAndTerminate => {
            preserve_and_terminate(store, host, &session, "stopped")?
        }
        Disposition::RepairRow => {
            preserve_and_terminate(store, host, &session, "its runtime had already ended")?
        }
        _ => {
            return Err(Error::StopFailed {
                id: id.clone(),
                message: error.unwrap_or_default(),
            });
        }
    }
    tracing::info!(session = %id, outcome = outcome.as_str(), "session stopped");
    store
        .get(id)?
        .ok_or_else(|| Error::NoSuchSession { id: id.clone() })
}

/// Save every running session for restore at the next boot and tear it down (a clean shutdown
/// with "stop sessions"). Returns the sessions that could not be torn down, with why; they stay
/// saved, and the next boot adopts them if they still run.
pub fn save_all(store: &Store, host: &Host) -> Result<Vec<(SessionId, String)>, Error> {
    let mut failed = Vec::new();
    let mut torn_down = std::collections::HashSet::new();
    for session in store.in_states(&[SessionState::Running])? {
        let runtime = complete(host, &session);
        store.mark_saved(&session.id, now_ms())?;
        failpoint::hit("save.after_mark");
        let (outcome, error) = runtime::stop(host, &runtime);
        if outcome != StopOutcome::Failed {
            torn_down.insert(session.id.clone());
        }
        let seen = if outcome == StopOutcome::NotFound {
            Evidence::ConfirmedDead
        } else {
            Evidence::Alive
        };
        if classify(SessionState::Saved, seen, Some(outcome)) == Disposition::PreserveWithWarning {
            let message = error.unwrap_or_default();
            tracing::warn!(session = %session.id, message = %message, "could not tear down a saved session");
            failed.push((session.id.clone(), message));
        } else {
            tracing::info!(session = %session.id, "session saved for restore");
        }
    }
    failpoint::hit("save.after_teardown");
    if !torn_down.is_empty() {
        // Torn down means everything they ran, detached processes included: one scan for all.
        crate::orphans::reap_sessions(host, &torn_down, &mut Vec::new());
    }
    Ok(failed)
}

/// The session's runtime with a tmux handle completed from a probe when only its name was
/// recorded and its marker proves it ours.
fn complete(host: &Host, session: &Session) -> Runtime {
    match &session.runtime {
        Runtime::Tmux(handle) if !handle.is_recorded() => {
            let probe = host.tmux.probe();
            let processes = Default::default();
            let snapshot = reconcile_core::Snapshot {
                boot_id: &host.boot_id,
                instance: &host.instance_id,
                tmux: &probe,
                processes: &processes,
            };
            if evidence(session, &snapshot) == Evidence::Alive {
                runtime::recorded(&session.runtime, &probe)
            } else {
                session.runtime.clone()
            }
        }
        _ => session.runtime.clone(),
    }
}

/// Capture uncommitted work, then mark the row terminated. If the capture fails the row is left
/// exactly as it was: nothing is terminated without its work saved.
pub(crate) fn preserve_and_terminate(
    store: &Store,
    host: &Host,
    row: &Session,
    reason: &str,
) -> Result<(), Error> {
    failpoint::hit("terminate.before_preserve");
    let reference = match host.git.preserve(&row.worktree, &row.id)? {
        Preserved::Saved { reference, .. } => Some(reference),
        Preserved::Clean | Preserved::Missing | Preserved::NotAWorktree => None,
    };
    failpoint::hit("terminate.after_preserve");
    store.terminate(&row.id, reason, reference.as_deref(), now_ms())?;
    Ok(())
}

/// The lease the daemon holds (and renews) for a session on a warm slot.
fn session_lease(id: &SessionId) -> Result<Lease, Error> {
    let now = now_ms();
    Ok(Lease {
        id: LeaseId::parse(&crate::host::new_id()?).expect("generated ids are valid"),
        slot: SlotId::parse("pending").expect("a valid id"),
        owner: format!("session:{id}"),
        session: Some(id.clone()),
        heartbeat_ms: now,
        ttl_ms: window::SESSION_LEASE_TTL_MS,
        acquired_ms: now,
    })
}

/// A fresh session id.
fn new_session_id() -> Result<SessionId, Error> {
    Ok(SessionId::parse(&crate::host::new_id()?).expect("generated ids are valid"))
}

/// Check that `program` can be executed: a path to an executable file, or a name on PATH.
fn resolve_program(program: &str) -> Result<PathBuf, Error> {
    let not_found = || Error::CommandNotFound {
        program: program.chars().take(200).collect(),
    };
    let executable = |p: &Path| {
        fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.is_empty() {
        return Err(not_found());
    }
    if program.contains('/') {
        let path = PathBuf::from(program);
        return if executable(&path) {
            Ok(path)
        } else {
            Err(not_found())
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| executable(candidate))
        .ok_or_else(not_found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_valid_and_distinct() {
        let a = new_session_id().unwrap();
        let b = new_session_id().unwrap();
        assert_eq!(a.as_str().len(), 10);
        assert_ne!(a, b);
    }

    #[test]
    fn programs_resolve_on_path_or_by_path() {
        assert!(resolve_program("sh").is_ok());
        assert!(resolve_program("/bin/sh").is_ok());
        assert!(matches!(
            resolve_program("no-such-program-xyz"),
            Err(Error::CommandNotFound { .. })
        ));
        let dir = std::env::temp_dir().join(format!("rc-resolve-{}", std::process::id()));
        fs::write(&dir, "not executable").unwrap();
        let plain = resolve_program(dir.to_str().unwrap());
        fs::remove_file(&dir).unwrap();
        assert!(matches!(plain, Err(Error::CommandNotFound { .. })));
        assert!(resolve_program("").is_err());
    }
}
