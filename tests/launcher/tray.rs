//! The tray over D-Bus (its menu is published with dbusmenu): the status line follows the
//! daemon, "Restart daemon" restarts it with sessions surviving, "Quit" ends the app and leaves
//! the daemon running; a second launch leaves the first one alone and exits.

use std::time::Duration;

use reconcile_e2e::{DEADLINE, Env, alive, exits_within};
use reconcile_testkit::wait_for;

use crate::desktop::{App, Bus, Display, ONE_AT_A_TIME};

const DBUS: &str = "org.freedesktop.DBus";

/// The launcher's dbusmenu: its bus name and object path.
struct Menu<'a> {
    bus: &'a Bus,
    name: String,
    path: String,
}

impl Menu<'_> {
    /// Find the tray menu the process `pid` published.
    fn find(bus: &Bus, pid: u32) -> Menu<'_> {
        let mut found = None;
        wait_for("the tray menu on the bus", DEADLINE, || {
            found = menu_of(bus, pid);
            found.is_some()
        });
        let (name, path) = found.unwrap();
        Menu { bus, name, path }
    }

    /// (id, label) of every item.
    fn items(&self) -> Vec<(u32, String)> {
        let layout = self
            .bus
            .call(
                &self.name,
                &self.path,
                "com.canonical.dbusmenu.GetLayout",
                &["0", "-1", "[]"],
            )
            .unwrap();
        layout
            .split("<(")
            .skip(1)
            .filter_map(|item| {
                let id = item.split(',').next()?.trim().parse().ok()?;
                let label = item.split("'label': <'").nth(1)?.split("'>").next()?;
                Some((id, label.to_owned()))
            })
            .collect()
    }

    fn label(&self, starts: &str) -> Option<String> {
        self.items()
            .into_iter()
            .map(|(_, l)| l)
            .find(|l| l.starts_with(starts))
    }

    fn click(&self, label: &str) {
        let id = self
            .items()
            .into_iter()
            .find(|(_, l)| l == label)
            .unwrap_or_else(|| panic!("no item {label:?} in {:?}", self.items()))
            .0;
        self.bus
            .call(
                &self.name,
                &self.path,
                "com.canonical.dbusmenu.Event",
                &[&id.to_string(), "clicked", "<0>", "0"],
            )
            .unwrap();
    }
}

/// The bus name owned by `pid` that has an ayatana notification item, and its menu's path.
fn menu_of(bus: &Bus, pid: u32) -> Option<(String, String)> {
    let names = bus
        .call(
            DBUS,
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.ListNames",
            &[],
        )
        .unwrap();
    for name in names.split('\'').filter(|n| n.starts_with(":1.")) {
        let Ok(owner) = bus.call(
            DBUS,
            "/org/freedesktop/DBus",
            "org.freedesktop.DBus.GetConnectionUnixProcessID",
            &[name],
        ) else {
            continue;
        };
        if owner.trim() != format!("(uint32 {pid},)") {
            continue;
        }
        let Ok(tree) = bus.try_gdbus(&[
            "introspect",
            "--session",
            "--dest",
            name,
            "--object-path",
            "/org/ayatana/NotificationItem",
        ]) else {
            continue;
        };
        let item = tree
            .lines()
            .filter_map(|l| l.trim().strip_prefix("node "))
            .map(|n| n.trim_end_matches(" {").trim().to_owned())
            .find(|n| !n.is_empty() && n != "/org/ayatana/NotificationItem");
        let Some(item) = item else { continue };
        let item = item.trim_start_matches('/');
        return Some((
            name.to_owned(),
            format!("/org/ayatana/NotificationItem/{item}/Menu"),
        ));
    }
    None
}

fn ready_pid(env: &Env, not: Option<u32>) -> u32 {
    let mut pid = 0;
    wait_for("a ready daemon", DEADLINE, || {
        let Some(id) = env.daemon_identity() else {
            return false;
        };
        pid = id.pid;
        Some(pid) != not && alive(&id) && env.client().ready().unwrap_or(false)
    });
    pid
}

#[test]
fn the_tray_restarts_the_daemon_and_quits_leaving_it_running() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = Env::new("launcher-tray");
    let display = Display::start();
    let bus = Bus::start();
    let mut app = App::start(&env, &display, &bus);
    let first = ready_pid(&env, None);
    let menu = Menu::find(&bus, app.pid());

    let session = env.session("exec sleep 600");
    wait_for("the status line to count the session", DEADLINE, || {
        menu.label("Daemon ready").as_deref() == Some("Daemon ready · 1 session")
    });

    // A second launch finds the first, asks it to show its window, and exits.
    let mut second = App::start(&env, &display, &bus);
    assert!(
        exits_within(second.pid(), DEADLINE),
        "the second instance exits"
    );
    let _ = second.child.wait();
    assert!(app.child.try_wait().unwrap().is_none(), "the first runs on");

    menu.click("Restart daemon");
    let restarted = ready_pid(&env, Some(first));
    assert_ne!(restarted, first);
    assert_eq!(
        env.client().session(&session).unwrap().state.as_str(),
        "running",
        "the session survives the restart"
    );
    wait_for("the status line after the restart", DEADLINE, || {
        menu.label("Daemon ready").as_deref() == Some("Daemon ready · 1 session")
    });

    menu.click("Quit");
    assert!(
        exits_within(app.pid(), Duration::from_secs(30)),
        "Quit ends the app"
    );
    let status = app.child.wait().unwrap();
    assert!(status.success(), "{status}");
    let daemon = env.daemon_identity().unwrap();
    assert_eq!(daemon.pid, restarted);
    assert!(alive(&daemon), "the daemon keeps running after Quit");
    assert_eq!(
        env.client().session(&session).unwrap().state.as_str(),
        "running"
    );
}
