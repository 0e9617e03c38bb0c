//! The boot reconcile: the live, reap and restore passes, each with one batched probe.

use std::collections::BTreeMap;
use std::time::Instant;

use reconcile_core::{
    Disposition, Evidence, OwnerMarker, Pass, PassReport, ProcessObservation, Report, Runtime,
    Session, SessionState, Snapshot, StopOutcome, TmuxHandle, TmuxListing, TmuxProbe, Warning,
    WarningCode, classify, evidence,
};
use reconcile_store::Store;
use reconcile_tmux::Create;

use crate::Error;
use crate::host::{Host, now_ms};
use crate::runtime::{self, recorded};
use crate::session;
use reconcile_proc::failpoint;

/// Reconcile the store against reality: adopt what survived, preserve and end what died, reap
/// what leaked, restore what a clean shutdown saved. A failure on one row is recorded in the
/// report and skipped; nothing here returns early.
pub fn reconcile(store: &Store, host: &Host) -> Report {
    passes(
        store,
        host,
        &[
            Pass::Live,
            Pass::Reap,
            Pass::Restore,
            Pass::Pool,
            Pass::Orphans,
        ],
        true,
    )
}

/// The periodic sweep while the daemon runs: the live, reap and pool passes, never a restore (a
/// running daemon starts no agent it was not asked to), and the orphan pass when `orphans`.
pub fn sweep(store: &Store, host: &Host, orphans: bool) -> Report {
    if orphans {
        passes(
            store,
            host,
            &[Pass::Live, Pass::Reap, Pass::Pool, Pass::Orphans],
            false,
        )
    } else {
        passes(store, host, &[Pass::Live, Pass::Reap, Pass::Pool], false)
    }
}

/// `boot`: the daemon has not started provisioning yet.
fn passes(store: &Store, host: &Host, passes: &[Pass], boot: bool) -> Report {
    let mut report = Report::default();
    for &pass in passes {
        let states: &[SessionState] = match pass {
            Pass::Live => &[SessionState::Running, SessionState::Spawning],
            Pass::Reap => &[SessionState::Terminated],
            Pass::Restore => &[SessionState::Saved],
            Pass::Orphans => {
                orphan_pass(store, host, &mut report);
                continue;
            }
            Pass::Pool => {
                pool_pass(store, host, &mut report, boot);
                continue;
            }
        };
        run_pass(store, host, &mut report, pass, states);
    }
    tracing::info!(
        actions = report.actions(),
        warnings = report.warning_count(),
        child_processes = report.child_processes,
        duration_ms = report.duration_ms,
        "reconcile finished"
    );
    report
}

/// One scan of `/proc`; processes of ended sessions are stopped. Runs after the session passes,
/// so a session restored a moment ago counts as running.
fn orphan_pass(store: &Store, host: &Host, report: &mut Report) {
    let started = Instant::now();
    let children_before = host.children.get();
    let mut warnings = Vec::new();
    failpoint::hit("orphans.before_scan");
    let pass = crate::orphans::reap_orphans(store, host, &mut warnings);
    for w in warnings {
        report.warn(w);
    }
    report.add_pass(PassReport {
        pass: Pass::Orphans,
        rows: pass.counts.marked,
        duration_ms: started.elapsed().as_millis() as u64,
        child_processes: host.children.get() - children_before,
        probe_answered: pass.tmux_answered,
    });
    report.orphans = Some(pass.counts);
}

/// Leases, slots and windows, after the session passes (so a lease's session state is current)
/// and before any provisioning.
fn pool_pass(store: &Store, host: &Host, report: &mut Report, boot: bool) {
    let started = Instant::now();
    let children_before = host.children.get();
    let mut warnings = Vec::new();
    let counts = crate::pool::pool_pass(store, host, now_ms(), boot, &mut warnings);
    for w in warnings {
        report.warn(w);
    }
    report.add_pass(PassReport {
        pass: Pass::Pool,
        rows: counts.leases + counts.slots,
        duration_ms: started.elapsed().as_millis() as u64,
        child_processes: host.children.get() - children_before,
        probe_answered: true,
    });
    report.pool = Some(counts);
}

/// What one pass saw, gathered before any decision.
struct Observed {
    tmux: TmuxProbe,
    processes: BTreeMap<u32, ProcessObservation>,
}

/// One batched tmux probe (only when a row needs it) and one /proc read per recorded pid.
fn observe(host: &Host, rows: &[Session]) -> Observed {
    let needs_tmux = rows.iter().any(|r| matches!(r.runtime, Runtime::Tmux(_)));
    let tmux = if needs_tmux {
        host.tmux.probe()
    } else {
        TmuxProbe::Listing(TmuxListing::default())
    };
    let processes = rows
        .iter()
        .filter_map(|r| match &r.runtime {
            Runtime::Process(Some(p)) if p.pid != 0 => Some(p.pid),
            _ => None,
        })
        .map(|pid| (pid, reconcile_proc::observe(&host.boot_id, pid)))
        .collect();
    Observed { tmux, processes }
}

struct PassContext<'a> {
    store: &'a Store,
    host: &'a Host,
    pass: Pass,
    tmux: &'a TmuxProbe,
}

fn run_pass(store: &Store, host: &Host, report: &mut Report, pass: Pass, states: &[SessionState]) {
    let started = Instant::now();
    let children_before = host.children.get();
    let rows = match store.in_states(states) {
        Ok(rows) => rows,
        Err(e) => {
            report.warn(Warning {
                pass,
                session: None,
                code: WarningCode::StoreFailed,
                message: e.to_string(),
            });
            Vec::new()
        }
    };
    let observed = observe(host, &rows);
    let snapshot = Snapshot {
        boot_id: &host.boot_id,
        instance: &host.instance_id,
        tmux: &observed.tmux,
        processes: &observed.processes,
    };
    let cx = PassContext {
        store,
        host,
        pass,
        tmux: &observed.tmux,
    };
    for row in &rows {
        let seen = evidence(row, &snapshot);
        let decided = classify(row.state, seen, None);
        let (seen, done) = match apply(&cx, row, seen, decided) {
            Ok(outcome) => outcome,
            Err(warning) => {
                tracing::warn!(pass = %pass, session = %row.id, code = ?warning.code, message = %warning.message, "reconcile could not act on a row");
                report.warn(warning);
                (seen, Disposition::PreserveWithWarning)
            }
        };
        if done.is_action() {
            tracing::info!(pass = %pass, session = %row.id, evidence = %seen, disposition = %done, "reconciled");
        }
        report.count(pass, seen, done);
    }
    report.add_pass(PassReport {
        pass,
        rows: rows.len() as u64,
        duration_ms: started.elapsed().as_millis() as u64,
        child_processes: host.children.get() - children_before,
        probe_answered: observed.tmux != TmuxProbe::Failed,
    });
}

/// Carry out one decision; the outcome is the evidence and disposition to count.
fn apply(
    cx: &PassContext<'_>,
    row: &Session,
    seen: Evidence,
    decided: Disposition,
) -> Result<(Evidence, Disposition), Warning> {
    match decided {
        Disposition::MarkRunning => {
            let runtime = recorded(&row.runtime, cx.tmux);
            cx.store
                .mark_running(&row.id, &runtime, now_ms())
                .map_err(|e| warning(cx, row, WarningCode::StoreFailed, e))?;
        }
        Disposition::PreserveAndTerminate => {
            let reason = match row.state {
                SessionState::Spawning => "interrupted while starting",
                _ => "its runtime ended",
            };
            preserve_and_terminate(cx, row, reason)?;
        }
        Disposition::Reap => return reap(cx, row, seen),
        Disposition::Restore => restore(cx, row)?,
        Disposition::Adopt
        | Disposition::NoAction
        | Disposition::Preserve
        | Disposition::RepairRow
        | Disposition::PreserveWithWarning => {}
    }
    Ok((seen, decided))
}

fn warning(
    cx: &PassContext<'_>,
    row: &Session,
    code: WarningCode,
    error: impl std::fmt::Display,
) -> Warning {
    Warning {
        pass: cx.pass,
        session: Some(row.id.clone()),
        code,
        message: error.to_string(),
    }
}

/// Capture uncommitted work, then mark the row terminated; a failed capture leaves the row as
/// it was.
fn preserve_and_terminate(
    cx: &PassContext<'_>,
    row: &Session,
    reason: &str,
) -> Result<(), Warning> {
    session::preserve_and_terminate(cx.store, cx.host, row, reason).map_err(|e| {
        let code = match e {
            Error::Git(_) => WarningCode::PreserveFailed,
            _ => WarningCode::StoreFailed,
        };
        warning(cx, row, code, e)
    })
}

/// Destroy the leaked runtime of a terminated row, then classify what the stop returned.
fn reap(
    cx: &PassContext<'_>,
    row: &Session,
    seen: Evidence,
) -> Result<(Evidence, Disposition), Warning> {
    let (outcome, error) = runtime::stop(cx.host, &recorded(&row.runtime, cx.tmux));
    failpoint::hit("reap.after_destroy");
    // A typed not-found is itself confirmed death: the server answered without it.
    let seen = if outcome == StopOutcome::NotFound {
        Evidence::ConfirmedDead
    } else {
        seen
    };
    let done = classify(row.state, seen, Some(outcome));
    if done == Disposition::PreserveWithWarning {
        let message = error.unwrap_or_else(|| "the runtime could not be stopped".to_owned());
        return Err(warning(cx, row, WarningCode::StopFailed, message));
    }
    Ok((seen, done))
}

/// Relaunch a saved session in its worktree with its resume token. The intent (the tmux name)
/// is recorded first, so a crash after tmux created the session is adopted, not restored twice.
fn restore(cx: &PassContext<'_>, row: &Session) -> Result<(), Warning> {
    let fail = |message: String| warning(cx, row, WarningCode::RestoreFailed, message);
    if !matches!(row.runtime, Runtime::Tmux(_)) {
        return Err(fail(format!(
            "a {} session cannot be restored here",
            row.runtime.kind().as_str()
        )));
    }
    if row.command.is_empty() {
        return Err(fail("no command was recorded".to_owned()));
    }
    if !row.worktree.is_dir() {
        return Err(fail(format!(
            "its worktree {} is missing",
            row.worktree.display()
        )));
    }
    let name = row.id.tmux_name();
    cx.store
        .set_runtime(
            &row.id,
            &Runtime::Tmux(TmuxHandle::intent(name.clone())),
            now_ms(),
        )
        .map_err(|e| warning(cx, row, WarningCode::StoreFailed, e))?;
    failpoint::hit("restore.after_intent");
    let marker = OwnerMarker {
        instance: cx.host.instance_id.clone(),
        session: row.id.clone(),
    };
    let handle = cx
        .host
        .tmux
        .create(&Create {
            name: &name,
            dir: &row.worktree,
            command: &row.command,
            marker: &marker,
            resume_token: row.resume_token.as_ref(),
        })
        .map_err(|e| fail(e.to_string()))?;
    failpoint::hit("restore.after_create");
    cx.store
        .mark_running(&row.id, &Runtime::Tmux(handle), now_ms())
        .map_err(|e| warning(cx, row, WarningCode::StoreFailed, e))
}
