//! The window in a real webview: the daemon ready, a session created through the daemon's API
//! appearing live, stopped from the UI, and the daemon restarted from the UI with a new pid while
//! the session keeps running.

use reconcile_api::CreateSession;
use reconcile_e2e::Env;

use crate::desktop::{Bus, Display, Driver, ONE_AT_A_TIME};

fn sleeping(env: &Env) -> String {
    env.client()
        .create(&CreateSession {
            repo: env.repo().display().to_string(),
            command: vec!["sleep".into(), "600".into()],
            name: Some("from the API".into()),
            ..Default::default()
        })
        .unwrap()
        .id
}

#[test]
fn the_window_shows_the_daemon_and_its_sessions_live() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = Env::new("launcher-webview");
    let display = Display::start();
    let bus = Bus::start();
    let driver = Driver::start(&env, &display, &bus);
    driver.resize(1280, 800);

    // The app took the daemon over by itself and shows it ready, with the run-file's pid.
    driver.wait_until(
        "the window to show the daemon ready",
        "return document.querySelector('#phase').dataset.phase === 'ready'",
    );
    let pid = env.run_file().pid;
    driver.wait_until(
        "the daemon's pid",
        &format!("return document.querySelector('#daemon-pid').textContent === '{pid}'"),
    );
    let page = driver.script("return document.body.innerText").to_string();
    assert!(!page.contains(&env.token()), "the UI never shows the token");
    driver.screenshot("1-ready");

    // A session created through the daemon's API appears, fed by the event stream.
    let id = sleeping(&env);
    let row = format!("#sessions tr[data-id='{id}']");
    driver.wait_until(
        "the new session in the table",
        &format!("const r = document.querySelector(\"{row}\"); return !!r && r.dataset.state === 'running'"),
    );
    driver.screenshot("2-session");

    // Stopped from the UI, it turns terminated.
    driver.click(&format!("{row} button.stop"));
    driver.wait_until(
        "the session to show terminated",
        &format!("const r = document.querySelector(\"{row}\"); return !!r && r.dataset.state === 'terminated'"),
    );
    assert_eq!(
        env.client().session(&id).unwrap().state.as_str(),
        "terminated"
    );
    driver.screenshot("3-stopped");

    // "Restart daemon" from the UI: a new pid, and the running session survives.
    let survivor = sleeping(&env);
    driver.wait_until(
        "the second session in the table",
        &format!("return !!document.querySelector(\"#sessions tr[data-id='{survivor}']\")"),
    );
    driver.click("#restart");
    driver.wait_until(
        "a new daemon pid, ready",
        &format!(
            "return document.querySelector('#phase').dataset.phase === 'ready' && \
             !['{pid}', '–'].includes(document.querySelector('#daemon-pid').textContent)"
        ),
    );
    let new_pid = env.run_file().pid;
    assert_ne!(new_pid, pid);
    driver.wait_until(
        "the window to show the new daemon's pid",
        &format!("return document.querySelector('#daemon-pid').textContent === '{new_pid}'"),
    );
    assert_eq!(
        env.client().session(&survivor).unwrap().state.as_str(),
        "running",
        "sessions survive a restart"
    );
    driver.wait_until(
        "the survivor still listed running",
        &format!("const r = document.querySelector(\"#sessions tr[data-id='{survivor}']\"); return !!r && r.dataset.state === 'running'"),
    );
    driver.screenshot("4-restarted");

    // The small size still shows the table and the actions.
    driver.resize(800, 600);
    driver.wait_until(
        "the layout at 800x600",
        "return window.innerWidth <= 800 && document.querySelector('#restart').getBoundingClientRect().right <= window.innerWidth",
    );
    driver.screenshot("5-800x600");
}

/// A daemon that cannot start (its database is not one) crash-loops; supervision stops and the
/// window says so, with the daemon's last log lines.
#[test]
fn a_crash_loop_shows_with_the_daemons_last_log_lines() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let env = Env::new("launcher-crashloop");
    std::fs::create_dir_all(&env.home).unwrap();
    std::fs::write(env.home.join("reconcile.db"), b"this is not a database").unwrap();
    let display = Display::start();
    let bus = Bus::start();
    let driver = Driver::start(&env, &display, &bus);
    driver.wait_until(
        "the window to show the crash loop",
        "return document.querySelector('#phase').dataset.phase === 'crash_loop'",
    );
    driver.wait_until(
        "the daemon's last log lines",
        "const l = document.querySelector('#log'); return !l.hidden && l.textContent.includes('reconcile.db')",
    );
    driver.screenshot("6-crash-loop");
    assert_eq!(
        std::fs::read(env.home.join("reconcile.db")).unwrap(),
        b"this is not a database",
        "the bad file is left as it was"
    );
}
