//! One look at the daemon of a state directory: its run-file, who holds its port, and what
//! `/healthz` and `/readyz` answer within short deadlines.

use std::time::Duration;

use reconcile_api::{Client, RunFile, read_run_file};
use reconcile_core::{
    HealthSeen, PortSeen, ProcessIdentity, ReadySeen, RunFacts, RunFileSeen, TakeoverSeen,
};
use reconcile_proc::{Holder, port_holder};

use crate::run::Config;

/// How long one probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the look found, and the run-file itself (to remove it or read its token).
pub(crate) struct Look {
    pub seen: TakeoverSeen,
    pub run: Option<RunFile>,
}

pub(crate) fn look(config: &Config, boot_id: &str, waited: Duration, restart: bool) -> Look {
    let run = read_run_file(&config.home.run_file());
    let run_file = match &run {
        Ok(run) => RunFileSeen::Valid(RunFacts {
            daemon: ProcessIdentity {
                boot_id: run.boot_id.clone(),
                pid: run.pid,
                start_ticks: run.start_ticks,
            },
            port: run.port,
            version: run.version.clone(),
        }),
        Err(reconcile_api::RunFileError::Absent { .. }) => RunFileSeen::Absent,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring the run-file");
            RunFileSeen::Invalid
        }
    };
    let port = match port_holder(boot_id, config.port) {
        Ok(Holder::Nobody) => PortSeen::Free,
        Ok(Holder::Process(h)) => PortSeen::Held {
            holder: h.identity,
            program: h.exe.map_or(h.program, |p| p.display().to_string()),
        },
        Ok(Holder::Unknown) | Err(_) => PortSeen::Unknown,
    };
    // Probe only what listens; a free port needs no HTTP round trip.
    let (health, ready) = if port == PortSeen::Free {
        (HealthSeen::NoAnswer, ReadySeen::NoAnswer)
    } else {
        let probe = Client::with_timeout(config.port, String::new(), PROBE_TIMEOUT);
        let health = probe
            .health()
            .map_or(HealthSeen::NoAnswer, |h| HealthSeen::Answered {
                pid: h.pid,
                version: h.version,
            });
        // A daemon that did not answer /healthz will not answer /readyz: spare the deadline.
        let ready = match health {
            HealthSeen::NoAnswer => ReadySeen::NoAnswer,
            HealthSeen::Answered { .. } => match probe.ready() {
                Ok(true) => ReadySeen::Ready,
                Ok(false) => ReadySeen::Reconciling,
                Err(_) => ReadySeen::NoAnswer,
            },
        };
        (health, ready)
    };
    Look {
        seen: TakeoverSeen {
            run_file,
            health,
            ready,
            port,
            version: reconcile_api::VERSION.to_owned(),
            waited_ms: waited.as_millis() as u64,
            ready_deadline_ms: config.ready_deadline.as_millis() as u64,
            restart,
            lock_holder: match reconcile_proc::flock_holder(&config.home.daemon_lock()) {
                Ok(holder) => holder,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot tell whether a daemon holds its lock");
                    None
                }
            },
        },
        run: run.ok(),
    }
}
