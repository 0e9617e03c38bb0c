//! The commands the window calls. Each runs its daemon request on a blocking thread and answers
//! a typed `{code, message}` error; nothing here returns a token.

use reconcile_api::{CreateSession, ReportView, SessionView};
use tauri::{AppHandle, Manager, State};

use crate::daemon::{Launcher, Status};
use crate::error::{Code, UiError};

async fn blocking<T: Send + 'static>(
    app: AppHandle,
    f: impl FnOnce(&Launcher) -> Result<T, UiError> + Send + 'static,
) -> Result<T, UiError> {
    tauri::async_runtime::spawn_blocking(move || f(&app.state::<Launcher>()))
        .await
        .map_err(|e| UiError::new(Code::Internal, format!("the request stopped: {e}")))?
}

#[tauri::command]
pub fn status(launcher: State<'_, Launcher>) -> Status {
    launcher.status()
}

#[tauri::command]
pub async fn sessions(app: AppHandle) -> Result<Vec<SessionView>, UiError> {
    blocking(app, |l| Ok(l.client()?.sessions()?)).await
}

#[tauri::command]
pub async fn report(app: AppHandle) -> Result<ReportView, UiError> {
    blocking(app, |l| Ok(l.client()?.report()?)).await
}

/// Start `command` (a shell command line, run with `sh -c`) in a new worktree of `repo`.
#[tauri::command]
pub async fn create_session(
    app: AppHandle,
    repo: String,
    command: String,
    name: Option<String>,
) -> Result<SessionView, UiError> {
    let (repo, command) = (repo.trim().to_owned(), command.trim().to_owned());
    if repo.is_empty() || command.is_empty() {
        return Err(UiError::new(
            Code::InvalidRequest,
            "give the repository's path and the command to run",
        ));
    }
    blocking(app, move |l| {
        Ok(l.client()?.create(&CreateSession {
            repo,
            name: name.filter(|n| !n.trim().is_empty()),
            command: vec!["sh".into(), "-c".into(), command],
            ..Default::default()
        })?)
    })
    .await
}

#[tauri::command]
pub async fn stop_session(app: AppHandle, id: String) -> Result<SessionView, UiError> {
    blocking(app, move |l| Ok(l.client()?.stop(&id)?)).await
}

/// The command that attaches a terminal to a running session.
#[tauri::command]
pub async fn attach_command(app: AppHandle, id: String) -> Result<String, UiError> {
    blocking(app, move |l| {
        l.client()?.session(&id)?.attach.ok_or_else(|| {
            UiError::new(
                Code::Daemon(reconcile_api::ErrorCode::Conflict),
                format!("session {id} is not running; there is nothing to attach to"),
            )
        })
    })
    .await
}

/// Replace the daemon gracefully: sessions keep running and the new daemon adopts them.
#[tauri::command]
pub fn restart_daemon(app: AppHandle) {
    crate::app::restart_daemon(&app);
}
