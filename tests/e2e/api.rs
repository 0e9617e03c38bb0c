//! The HTTP API: the token, the Host check, and every kind of bad input, each a clear 4xx that
//! leaves nothing half-made.

use std::fs;

use reconcile_e2e::Env;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};

fn http() -> Client {
    Client::builder().no_proxy().build().unwrap()
}

/// Send, return (status, JSON body).
fn call(request: RequestBuilder) -> (u16, Value) {
    let response = request.send().unwrap();
    let status = response.status().as_u16();
    let body = response.json().unwrap_or(Value::Null);
    (status, body)
}

#[test]
fn v1_needs_the_token_and_every_route_a_loopback_host() {
    let mut env = Env::new("e2e-auth");
    env.start();
    let (status, body) = call(http().get(env.url("/v1/sessions")));
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("unauthorized")),
        "{body}"
    );
    assert!(
        body["message"].as_str().unwrap().contains("Bearer"),
        "{body}"
    );
    let (status, _) = call(
        http()
            .get(env.url("/v1/sessions"))
            .bearer_auth("wrong-token"),
    );
    assert_eq!(status, 401);
    let (status, _) = call(http().get(env.url("/v1/sessions")).bearer_auth(env.token()));
    assert_eq!(status, 200);

    for host in [
        "evil.example",
        "evil.example:47800",
        "10.1.2.3",
        "localhost.evil.example",
    ] {
        let (status, body) = call(
            http()
                .get(env.url("/v1/sessions"))
                .bearer_auth(env.token())
                .header("Host", host),
        );
        assert_eq!(
            (status, body["code"].as_str()),
            (403, Some("forbidden_host")),
            "{host}: {body}"
        );
        let (status, _) = call(http().get(env.url("/healthz")).header("Host", host));
        assert_eq!(status, 403, "{host}");
    }
    for host in [
        "localhost",
        &format!("127.0.0.1:{}", env.port),
        &format!("localhost:{}", env.port),
    ] {
        let (status, _) = call(http().get(env.url("/healthz")).header("Host", host));
        assert_eq!(status, 200, "{host}");
    }
    let (status, health) = call(http().get(env.url("/healthz")));
    assert_eq!(status, 200);
    assert_eq!(health["pid"], env.pid());
    assert_eq!(health["status"], "ok");
    let (status, ready) = call(http().get(env.url("/readyz")));
    assert_eq!((status, ready["status"].as_str()), (200, Some("ready")));
}

#[test]
fn bad_inputs_get_clear_errors_and_leave_nothing_behind() {
    let mut env = Env::new("e2e-bad");
    env.start();
    let repo = env.repo();
    let plain = env.dir.path().join("plain");
    fs::create_dir(&plain).unwrap();
    let token = env.token();
    let post = |body: String| {
        http()
            .post(env.url("/v1/sessions"))
            .bearer_auth(&token)
            .header("Content-Type", "application/json")
            .body(body)
    };
    let repo_s = repo.display().to_string();

    let cases: Vec<(&str, RequestBuilder, u16, &str)> = vec![
        (
            "malformed JSON",
            post("{\"repo\": ".into()),
            400,
            "invalid_request",
        ),
        (
            "not an object",
            post("[1, 2]".into()),
            400,
            "invalid_request",
        ),
        (
            "unknown field",
            post(json!({"repo": repo_s, "command": ["true"], "colour": "red"}).to_string()),
            400,
            "invalid_request",
        ),
        (
            "missing command",
            post(json!({"repo": repo_s}).to_string()),
            400,
            "invalid_request",
        ),
        (
            "empty command",
            post(json!({"repo": repo_s, "command": []}).to_string()),
            400,
            "invalid_request",
        ),
        (
            "oversized body",
            post(format!(
                "{{\"repo\": \"{}\", \"command\": [\"true\"]}}",
                "x".repeat(200_000)
            )),
            413,
            "body_too_large",
        ),
        (
            "not a git repository",
            post(json!({"repo": plain.display().to_string(), "command": ["true"]}).to_string()),
            400,
            "not_a_repository",
        ),
        (
            "no such path",
            post(json!({"repo": "/nonexistent/repo", "command": ["true"]}).to_string()),
            400,
            "not_a_repository",
        ),
        (
            "command not found",
            post(json!({"repo": repo_s, "command": ["no-such-program-xyz"]}).to_string()),
            400,
            "command_not_found",
        ),
        (
            "unknown session",
            http()
                .get(env.url("/v1/sessions/nosuchid"))
                .bearer_auth(&token),
            404,
            "not_found",
        ),
        (
            "unknown session, bad id",
            http()
                .get(env.url("/v1/sessions/..%2Fetc"))
                .bearer_auth(&token),
            404,
            "not_found",
        ),
        (
            "stop unknown session",
            http()
                .post(env.url("/v1/sessions/nosuchid/stop"))
                .bearer_auth(&token),
            404,
            "not_found",
        ),
        (
            "unknown endpoint",
            http().get(env.url("/v1/nothing")).bearer_auth(&token),
            404,
            "not_found",
        ),
        (
            "wrong method",
            http().delete(env.url("/v1/sessions")).bearer_auth(&token),
            405,
            "invalid_request",
        ),
        (
            "bad stop body",
            http()
                .post(env.url("/v1/daemon/stop"))
                .bearer_auth(&token)
                .body("{\"now\": true}"),
            400,
            "invalid_request",
        ),
    ];
    for (what, request, want_status, want_code) in cases {
        let (status, body) = call(request);
        assert_eq!(
            (status, body["code"].as_str()),
            (want_status, Some(want_code)),
            "{what}: {body}"
        );
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            !message.is_empty() && !message.contains(&token),
            "{what}: {body}"
        );
    }
    let (_, body) = call(post(
        json!({"repo": plain.display().to_string(), "command": ["true"]}).to_string(),
    ));
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(&plain.display().to_string()),
        "names the path: {body}"
    );

    // Nothing half-made: no tmux session, no worktree, no row.
    assert!(env.socket.sessions().is_empty());
    assert_eq!(fs::read_dir(env.home.join("worktrees")).unwrap().count(), 0);
    assert!(env.client().sessions().unwrap().is_empty());
    assert_eq!(
        env.client().health().unwrap().pid,
        env.pid(),
        "the daemon is unaffected"
    );
}

#[test]
fn stopping_twice_and_stopping_a_terminated_session_are_harmless() {
    let mut env = Env::new("e2e-stop2");
    env.start();
    let repo = env.repo();
    let client = env.client();
    let view = client
        .create(&reconcile_api::CreateSession {
            repo: repo.display().to_string(),
            command: vec!["sleep".into(), "600".into()],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(view.state.as_str(), "running");
    assert_eq!(client.stop(&view.id).unwrap().state.as_str(), "terminated");
    assert_eq!(client.stop(&view.id).unwrap().state.as_str(), "terminated");
    assert!(env.socket.sessions().is_empty());
    assert!(
        std::path::Path::new(&view.worktree).is_dir(),
        "the worktree stays"
    );
}
