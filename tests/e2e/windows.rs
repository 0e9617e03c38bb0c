//! Windows, warm slots and leases over the real HTTP API and CLI: provisioning progress on the
//! event stream, the lease endpoints for outside owners, typed errors, `session new --window`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use reconcile_api::{AcquireLease, ClientError, ErrorCode, OpenWindow, WindowView};
use reconcile_e2e::chaos::open_window;
use reconcile_e2e::{Env, ok};
use serde_json::Value;

fn code(e: ClientError) -> (u16, ErrorCode) {
    match e {
        ClientError::Api { status, body } => (status, body.code),
        other => panic!("not an API error: {other}"),
    }
}

#[test]
fn opening_a_window_provisions_in_the_background_with_progress_on_the_event_stream() {
    let mut env = Env::new("e2e-window-open");
    env.start();
    let events = env.events();
    let opened = env
        .client()
        .open_window(&OpenWindow {
            repo: env.repo().display().to_string(),
            slots: 3,
            name: Some("agents".into()),
        })
        .unwrap();
    assert_eq!(opened.target, 3);
    assert_eq!(opened.name.as_deref(), Some("agents"));

    // Each provisioned slot is announced with the whole pool, until all three are free.
    let mut reader = BufReader::new(events);
    let mut line = String::new();
    let mut progress = Vec::new();
    while progress.last() != Some(&3) {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "stream ended");
        if let Some(data) = line.strip_prefix("data:")
            && let Ok(event) = serde_json::from_str::<Value>(data.trim())
            && event["type"] == "window"
        {
            let window: WindowView = serde_json::from_value(event["window"].clone()).unwrap();
            if window.id == opened.id {
                progress.push(window.free());
            }
        }
    }
    assert!(
        progress.windows(2).all(|p| p[0] <= p[1]),
        "progress only grows: {progress:?}"
    );
    assert!(progress.contains(&1), "one slot at a time: {progress:?}");

    // The contract's listing: id, state, slots of {id, state}.
    let listed: Value = serde_json::from_str(&ok(env.cli(&["window", "ls", "--json"]))).unwrap();
    let w = &listed[0];
    assert_eq!(w["id"], opened.id.as_str());
    assert_eq!(w["state"], "open");
    let slots = w["slots"].as_array().unwrap();
    assert_eq!(slots.len(), 3);
    assert!(
        slots
            .iter()
            .all(|s| s["state"] == "free" && s["id"].is_string())
    );
}

#[test]
fn outside_owners_acquire_renew_and_release_leases() {
    let mut env = Env::new("e2e-window-lease");
    env.start();
    let window = open_window(&env, 1);
    let client = env.client();
    let lease = client
        .acquire_lease(
            &window,
            &AcquireLease {
                owner: "ci-runner-7".into(),
                ttl_ms: Some(30_000),
            },
        )
        .unwrap();
    assert_eq!(lease.owner, "ci-runner-7");
    assert_eq!(lease.expires_at_ms, lease.heartbeat_ms + 30_000);
    let worktree = PathBuf::from(lease.worktree.as_ref().unwrap());
    assert!(
        worktree.join(".git").exists(),
        "the holder works in the slot"
    );

    // The pool refills behind it; meanwhile the leased slot is listed as such.
    let w = client.window(&window).unwrap();
    let mine = w.slots.iter().find(|s| s.id == lease.slot).unwrap();
    assert_eq!(mine.state.as_str(), "leased");
    assert_eq!(mine.lease.as_ref().unwrap().id, lease.id);

    let renewed = client.renew_lease(&lease.id).unwrap();
    assert!(renewed.heartbeat_ms >= lease.heartbeat_ms);
    let released = client.release_lease(&lease.id).unwrap();
    assert_eq!(
        serde_json::to_value(released.decision).unwrap(),
        "return_to_pool"
    );
    assert_eq!(
        code(client.renew_lease(&lease.id).unwrap_err()),
        (404, ErrorCode::NotFound),
        "a released lease is gone"
    );
}

#[test]
fn window_requests_get_typed_errors() {
    let mut env = Env::new("e2e-window-errors");
    env.start();
    let client = env.client();
    let repo = env.repo().display().to_string();
    let open = |slots| OpenWindow {
        repo: repo.clone(),
        slots,
        name: None,
    };
    assert_eq!(
        code(client.open_window(&open(0)).unwrap_err()),
        (400, ErrorCode::InvalidRequest)
    );
    assert_eq!(
        code(
            client
                .open_window(&OpenWindow {
                    repo: "/nonexistent/repo".into(),
                    slots: 1,
                    name: None
                })
                .unwrap_err()
        ),
        (400, ErrorCode::NotARepository)
    );
    assert_eq!(
        code(client.window("nope").unwrap_err()),
        (404, ErrorCode::NotFound)
    );
    let acquire = AcquireLease {
        owner: "x".into(),
        ttl_ms: None,
    };
    assert_eq!(
        code(client.acquire_lease("Bad!", &acquire).unwrap_err()),
        (404, ErrorCode::NotFound)
    );
    let window = open_window(&env, 1);
    assert_eq!(
        code(
            client
                .acquire_lease(
                    &window,
                    &AcquireLease {
                        owner: "".into(),
                        ttl_ms: None
                    }
                )
                .unwrap_err()
        ),
        (400, ErrorCode::InvalidRequest)
    );
    // A session takes the only slot; until the refill lands there may be none free.
    let session = ok(env.cli(&["session", "new", "--window", &window, "--", "sleep", "600"]))
        .trim()
        .to_owned();
    let daemons_lease = client
        .window(&window)
        .unwrap()
        .slots
        .into_iter()
        .find(|s| s.session.as_deref() == Some(session.as_str()))
        .unwrap()
        .lease
        .unwrap();
    assert_eq!(
        code(client.release_lease(&daemons_lease.id).unwrap_err()),
        (409, ErrorCode::Conflict),
        "the daemon's lease for a session is not an outsider's to release"
    );
    ok(env.cli(&["window", "close", &window]));
    assert_eq!(
        code(client.acquire_lease(&window, &acquire).unwrap_err()),
        (409, ErrorCode::Conflict),
        "a closing window hands out nothing"
    );
    let http = reqwest::blocking::Client::new();
    let raw = http
        .post(env.url("/v1/windows"))
        .bearer_auth(env.token())
        .body(r#"{"repo":"/x","slots":1,"surprise":true}"#)
        .send()
        .unwrap();
    assert_eq!(raw.status(), 400, "unknown fields are refused");
    let raw = http.get(env.url("/v1/windows")).send().unwrap();
    assert_eq!(raw.status(), 401);
}

#[test]
fn a_window_with_no_free_slot_says_so() {
    let mut env = Env::new("e2e-window-full");
    env.start();
    let window = open_window(&env, 1);
    // Take slots faster than the provisioner refills the pool, and look for the typed answer.
    let client = env.client();
    let acquire = AcquireLease {
        owner: "greedy".into(),
        ttl_ms: None,
    };
    let refused = (0..50)
        .map(|_| client.acquire_lease(&window, &acquire))
        .find_map(Result::err)
        .expect("50 leases in a row can't all find a free slot of a 1-slot pool");
    assert_eq!(code(refused), (409, ErrorCode::NoFreeSlot));
}

#[test]
fn a_window_session_starts_in_a_warm_slot_without_repo() {
    let mut env = Env::new("e2e-window-session");
    env.start();
    let window = open_window(&env, 2);
    let slots_before = env.client().window(&window).unwrap().slots;
    let id = ok(env.cli(&["session", "new", "--window", &window, "--", "sleep", "600"]))
        .trim()
        .to_owned();
    let session = env.client().session(&id).unwrap();
    assert_eq!(session.state.as_str(), "running");
    assert!(
        slots_before.iter().any(|s| s.worktree == session.worktree),
        "it runs in one of the warm slots: {session:?}"
    );
    // A repository other than the window's is refused.
    let other = env.home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    reconcile_testkit::sh(&other, "git init -q");
    let out = env.cli(&[
        "session",
        "new",
        "--window",
        &window,
        "--repo",
        other.to_str().unwrap(),
        "--",
        "sleep",
        "1",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not window"),
        "{out:?}"
    );
}
