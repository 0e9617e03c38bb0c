//! Logs: `tracing` to `$RECONCILE_HOME/logs/reconciled.<date>.log`, rotated daily, a week kept.

use anyhow::Context;
use reconcile_home::Home;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_appender::rolling::{Builder, Rotation};
use tracing_subscriber::EnvFilter;

/// Install the subscriber. Keep the guard alive until exit so buffered lines are written.
pub fn init(home: &Home) -> anyhow::Result<WorkerGuard> {
    let appender = Builder::new()
        .rotation(Rotation::DAILY)
        .filename_prefix("reconciled")
        .filename_suffix("log")
        .max_log_files(7)
        .build(home.logs())
        .with_context(|| format!("cannot open the log directory {}", home.logs().display()))?;
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter =
        EnvFilter::try_from_env("RECONCILE_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(writer)
        .init();
    Ok(guard)
}
