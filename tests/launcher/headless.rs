//! `reconcile-launcher --takeover` with no display at all: spawns, then reuses.

use std::process::Stdio;

use reconcile_e2e::{Env, bin, ok};
use serde_json::Value;

#[test]
fn takeover_needs_no_display() {
    let env = Env::new("launcher-headless");
    let run = || {
        let out = env
            .command(&bin("reconcile-launcher"))
            .args(["--takeover", "--json"])
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        serde_json::from_str::<Value>(&ok(out)).unwrap()
    };
    let first = run();
    assert_eq!(first["action"], "spawned", "{first}");
    let second = run();
    assert_eq!(second["action"], "reused", "{second}");
    assert_eq!(first["pid"], second["pid"]);
    assert!(env.daemon_alive());
    // The daemon it started is the one beside it.
    let exe = std::fs::read_link(format!("/proc/{}/exe", env.run_file().pid)).unwrap();
    assert_eq!(exe, bin("reconciled"));

    let bad = env
        .command(&bin("reconcile-launcher"))
        .arg("--frobnicate")
        .env_remove("DISPLAY")
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown argument"));
}
