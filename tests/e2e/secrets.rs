//! A resume token given to a session reaches its command and appears nowhere else: no API
//! response, CLI output, report or log file.

use std::fs;

use reconcile_e2e::{DEADLINE, Env, ok};
use reconcile_testkit::wait_for;

const TOKEN: &str = "E2E-PLANTED-TOKEN-41c9d2";

#[test]
fn the_resume_token_reaches_the_command_and_nothing_else() {
    let mut env = Env::new("e2e-secret");
    env.start();
    let repo = env.repo().display().to_string();
    let out = env.dir.path().join("token");
    let script = format!(
        "printf %s \"$RECONCILE_RESUME_TOKEN\" > {}; exec sleep 600",
        out.display()
    );
    let created = ok(env.cli(&[
        "session",
        "new",
        "--repo",
        &repo,
        "--resume-token",
        TOKEN,
        "--",
        "sh",
        "-c",
        &script,
    ]));
    let id = created.trim().to_owned();
    wait_for("the command to run", DEADLINE, || {
        fs::metadata(&out).is_ok_and(|m| m.len() > 0)
    });
    assert_eq!(fs::read_to_string(&out).unwrap(), TOKEN);

    // Through a crash, a restart and a stop, then everything anyone could read.
    env.kill9();
    env.start();
    let mut seen = created;
    for args in [
        &["session", "ls", "--json"][..],
        &["session", "ls"],
        &["report", "--json"],
        &["report"],
        &["status", "--json"],
    ] {
        seen.push_str(&ok(env.cli(args)));
    }
    let client = env.client();
    seen.push_str(&format!("{:?}", client.session(&id).unwrap()));
    seen.push_str(&serde_json::to_string(&client.sessions().unwrap()).unwrap());
    seen.push_str(&ok(env.cli(&["session", "stop", &id])));
    let refused = env.cli(&[
        "session",
        "new",
        "--repo",
        "/nonexistent",
        "--resume-token",
        TOKEN,
        "--",
        "true",
    ]);
    seen.push_str(&String::from_utf8_lossy(&refused.stdout));
    seen.push_str(&String::from_utf8_lossy(&refused.stderr));
    assert!(
        !seen.contains(TOKEN),
        "the token leaked into output:\n{seen}"
    );
    let logs = env.logs();
    assert!(
        logs.contains("session started"),
        "the log is written:\n{logs}"
    );
    assert!(
        !logs.contains(TOKEN),
        "the token leaked into the log:\n{logs}"
    );
}
