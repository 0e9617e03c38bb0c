//! The tray: a status line, Open, Restart daemon, Quit, Quit and stop sessions. A desktop
//! without the tray library is logged and the app runs on without a tray.

use std::panic::{AssertUnwindSafe, catch_unwind};

use tauri::menu::{Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager, Wry};

use crate::daemon::{Phase, Status};

/// The tray's status line, kept to be updated.
pub struct Tray {
    status: MenuItem<Wry>,
}

/// Build the tray; `false` when this desktop cannot show one.
pub fn build(app: &AppHandle) -> bool {
    // Building the tray panics when libayatana-appindicator3 is missing at run time.
    match catch_unwind(AssertUnwindSafe(|| try_build(app))) {
        Ok(Ok(tray)) => {
            app.manage(tray);
            true
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "no tray icon; the app runs on without one");
            false
        }
        Err(_) => {
            tracing::warn!(
                "no tray icon: the tray library (libayatana-appindicator3) is missing; the app runs on without one"
            );
            false
        }
    }
}

fn try_build(app: &AppHandle) -> tauri::Result<Tray> {
    let status = MenuItem::with_id(app, "status", "Daemon starting…", false, None::<&str>)?;
    let menu = Menu::with_items(
        app,
        &[
            &status,
            &PredefinedMenuItem::separator(app)?,
            &MenuItem::with_id(app, "open", "Open", true, None::<&str>)?,
            &MenuItem::with_id(app, "restart", "Restart daemon", true, None::<&str>)?,
            &PredefinedMenuItem::separator(app)?,
            &MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?,
            &MenuItem::with_id(
                app,
                "quit-stop",
                "Quit and stop sessions",
                true,
                None::<&str>,
            )?,
        ],
    )?;
    let mut builder = TrayIconBuilder::with_id("reconcile")
        .menu(&menu)
        .tooltip("Reconcile")
        .on_menu_event(|app, event| match event.id().as_ref() {
            "open" => crate::app::show_window(app),
            "restart" => crate::app::restart_daemon(app),
            "quit" => crate::app::quit(app, false),
            "quit-stop" => crate::app::quit(app, true),
            _ => {}
        });
    if let Some(icon) = app.default_window_icon() {
        builder = builder.icon(icon.clone());
    }
    builder.build(app)?;
    Ok(Tray { status })
}

/// The status line for `status`: "Daemon ready · 12 sessions".
pub fn line(status: &Status) -> String {
    match status.phase {
        Phase::Ready => match status.running {
            Some(1) => "Daemon ready · 1 session".to_owned(),
            Some(n) => format!("Daemon ready · {n} sessions"),
            None => "Daemon ready".to_owned(),
        },
        Phase::Probing | Phase::Spawning => "Daemon starting…".to_owned(),
        Phase::Replacing => "Replacing the daemon…".to_owned(),
        Phase::Reconciling => "Daemon reconciling…".to_owned(),
        Phase::Restarting => "Daemon restarting…".to_owned(),
        Phase::CrashLoop => "Daemon crash loop: open for its log".to_owned(),
        Phase::Failed => "Daemon not running: open for why".to_owned(),
    }
}

pub fn show_status(app: &AppHandle, status: &Status) {
    if let Some(tray) = app.try_state::<Tray>() {
        let _ = tray.status.set_text(line(status));
    }
}
