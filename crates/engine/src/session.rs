//! The session lifecycle: create (row first, then worktree, then tmux, then running).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use reconcile_core::{OwnerMarker, Runtime, Secret, Session, SessionId, TmuxHandle};
use reconcile_store::{NewSession, Store};
use reconcile_tmux::Create;

use crate::Error;
use crate::failpoint;
use crate::host::{Host, now_ms};

/// What a caller asks for when starting a session.
#[derive(Clone, Debug)]
pub struct NewSessionRequest {
    pub repo: PathBuf,
    pub name: Option<String>,
    pub command: Vec<String>,
    pub resume_token: Option<Secret>,
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
    if !request.repo.exists() {
        return Err(Error::NoSuchRepository { path: request.repo });
    }
    let repo = host.git.repository_root(&request.repo)?;

    let id = new_session_id()?;
    let worktree = host.home.worktrees().join(id.as_str());
    let name = id.tmux_name();
    store.insert_spawning(
        &NewSession {
            id: id.clone(),
            name: request.name,
            repo: repo.clone(),
            branch: id.branch(),
            worktree: worktree.clone(),
            runtime: Runtime::Tmux(TmuxHandle::intent(name.clone())),
            command: request.command.clone(),
            resume_token: request.resume_token.clone(),
        },
        now_ms(),
    )?;
    failpoint::hit("create.after_row");

    let end = |reason: String| {
        if let Err(e) = store.terminate(&id, &reason, None, now_ms()) {
            tracing::error!(session = %id, error = %e, "could not end a session whose create failed");
        }
    };
    if let Err(e) = host.git.add_worktree(&repo, &id.branch(), &worktree) {
        end(format!("could not create its worktree: {e}"));
        return Err(e.into());
    }
    failpoint::hit("create.after_worktree");

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

/// A fresh session id: 10 characters of Crockford base32 (50 random bits).
fn new_session_id() -> Result<SessionId, Error> {
    const ALPHABET: &[u8] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut bytes = [0u8; 10];
    getrandom::fill(&mut bytes).map_err(|source| Error::Random { source })?;
    let id: String = bytes
        .iter()
        .map(|b| ALPHABET[(*b & 31) as usize] as char)
        .collect();
    Ok(SessionId::parse(&id).expect("the alphabet is valid for ids"))
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
