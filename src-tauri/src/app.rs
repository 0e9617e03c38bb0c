//! The desktop app: one instance, one window, the tray, the daemon kept in the background.

use std::sync::atomic::Ordering;

use anyhow::Context;
use tauri::{AppHandle, Manager, RunEvent, WindowEvent};

use crate::daemon::{self, Launcher, Phase};

/// Whether a tray was built: closing the window then hides it instead of quitting.
struct HasTray(bool);

pub fn run() -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("cannot find this program's own path")?;
    let config = reconcile_takeover::Config::from_env(&exe)?;
    let app = tauri::Builder::default()
        .plugin(tauri_plugin_single_instance::init(|app, _argv, _cwd| {
            // A second launch: focus this one.
            show_window(app);
        }))
        .manage(Launcher::new(config))
        .invoke_handler(tauri::generate_handler![
            crate::commands::status,
            crate::commands::sessions,
            crate::commands::report,
            crate::commands::create_session,
            crate::commands::stop_session,
            crate::commands::attach_command,
            crate::commands::restart_daemon,
        ])
        .setup(|app| {
            let has_tray = crate::tray::build(app.handle());
            app.manage(HasTray(has_tray));
            daemon::start(app.handle().clone());
            Ok(())
        })
        .on_window_event(|window, event| {
            if let WindowEvent::CloseRequested { api, .. } = event
                && window.app_handle().state::<HasTray>().0
            {
                // The tray keeps the app one click away.
                api.prevent_close();
                let _ = window.hide();
            }
        })
        .build(tauri::generate_context!())
        .context("cannot start the desktop app (is there a display?)")?;
    app.run(|app, event| {
        if let RunEvent::Exit = event {
            app.state::<Launcher>()
                .quitting
                .store(true, Ordering::SeqCst);
        }
    });
    Ok(())
}

pub fn show_window(app: &AppHandle) {
    if let Some(window) = app.get_webview_window("main") {
        let _ = window.show();
        let _ = window.unminimize();
        let _ = window.set_focus();
    }
}

/// A graceful replace, off the UI thread: the daemon's sessions survive; supervision sees it
/// go and follows the new one. After a crash loop or a failed takeover, a fresh start.
pub fn restart_daemon(app: &AppHandle) {
    if !app.state::<Launcher>().keeping.load(Ordering::SeqCst) {
        // Supervision had stopped (a crash loop, a refused takeover): start over.
        daemon::start(app.clone());
        return;
    }
    let app = app.clone();
    std::thread::spawn(move || {
        let launcher = app.state::<Launcher>();
        daemon::update(&app, |s| {
            s.phase = Phase::Restarting;
            s.message = Some("restarting the daemon; sessions keep running".into());
        });
        match reconcile_takeover::restart(&launcher.config, &mut |_| {}) {
            Ok(outcome) => daemon::ready(&app, outcome.pid),
            Err(e) => daemon::update(&app, |s| {
                s.phase = Phase::Failed;
                s.message = Some(e.to_string());
            }),
        }
    });
}

/// Quit the app. The daemon and its sessions keep running, unless `stop_sessions`: then every
/// session is saved for restore and torn down, and the daemon stops.
pub fn quit(app: &AppHandle, stop_sessions: bool) {
    let app = app.clone();
    std::thread::spawn(move || {
        let launcher = app.state::<Launcher>();
        launcher.quitting.store(true, Ordering::SeqCst);
        if stop_sessions {
            match launcher.client().and_then(|c| c.stop_daemon(true)) {
                Ok(()) => tracing::info!("the daemon saved its sessions and stopped"),
                Err(e) => tracing::error!(error = %e, "could not stop the sessions"),
            }
        }
        app.exit(0);
    });
}
