//! Reconcile of 1,000 rows probes in batches: a handful of child processes, not one per row.

use std::path::PathBuf;

use reconcile_core::{Disposition as D, Evidence as E, Runtime, SessionId, TmuxHandle, TmuxProbe};
use reconcile_store::NewSession;

use crate::fixture::Fixture;

fn row(repo: &std::path::Path, id: &SessionId, runtime: Runtime) -> NewSession {
    NewSession {
        id: id.clone(),
        name: None,
        repo: repo.to_owned(),
        branch: id.branch(),
        worktree: PathBuf::from("/nonexistent/worktree").join(id.as_str()),
        runtime,
        command: vec!["sleep".into(), "600".into()],
        resume_token: None,
    }
}

#[test]
fn a_thousand_rows_start_a_handful_of_child_processes() {
    let mut f = Fixture::new("scale");
    // 100 live tmux sessions, made in one tmux call.
    let live: Vec<SessionId> = (0..100)
        .map(|i| SessionId::parse(&format!("live-{i}")).unwrap())
        .collect();
    let mut args: Vec<String> = Vec::new();
    for id in &live {
        if !args.is_empty() {
            args.push(";".into());
        }
        args.extend(["new-session", "-d", "-s", &id.tmux_name(), "sleep", "600"].map(String::from));
    }
    let out = f
        .socket
        .tmux(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let TmuxProbe::Listing(listing) = f.host.tmux.probe() else {
        panic!("no listing")
    };
    assert_eq!(listing.sessions.len(), 100);

    let repo = f.repo.clone();
    f.store
        .transaction(|tx| {
            for id in &live {
                let found = listing.session(&id.tmux_name()).unwrap();
                let handle = TmuxHandle {
                    name: id.tmux_name(),
                    id: Some(found.id.clone()),
                    server: listing.server.clone(),
                    pane: found.pane.clone(),
                };
                tx.insert_spawning(&row(&repo, id, Runtime::Tmux(handle.clone())), 1)?;
                tx.mark_running(id, &Runtime::Tmux(handle), 1)?;
            }
            for i in 0..900 {
                let id = SessionId::parse(&format!("done-{i}")).unwrap();
                let handle = TmuxHandle {
                    name: id.tmux_name(),
                    id: Some(format!("${}", 1000 + i)),
                    server: listing.server.clone(),
                    pane: None,
                };
                tx.insert_spawning(&row(&repo, &id, Runtime::Tmux(handle)), 1)?;
                tx.terminate(&id, "stopped", None, 1)?;
            }
            Ok(())
        })
        .unwrap();

    let report = f.reconcile();
    assert_eq!(report.counted(E::Alive, D::Adopt), 100, "{report}");
    assert_eq!(
        report.counted(E::ConfirmedDead, D::NoAction),
        900,
        "{report}"
    );
    // One probe for the live pass, one for the reap pass, none for an empty restore pass.
    assert_eq!(report.child_processes, 2, "{report}");
    assert!(
        report.warning_count() == 0 && report.actions() == 0,
        "{report}"
    );
}
