//! What the daemon's tasks share: the stores, the adapters, readiness, the last report, events.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use reconcile_api::{Event, ReportView};
use reconcile_engine::Host;
use reconcile_store::Store;
use tokio::sync::{Notify, broadcast, watch};

#[derive(Debug)]
pub struct State {
    pub host: Host,
    /// Every change goes through this connection, one at a time: reconcile, sweeps, creates and
    /// stops never interleave.
    writer: Mutex<Store>,
    /// Listings read here (WAL), so they do not wait behind a slow create.
    reader: Mutex<Store>,
    pub token: String,
    pub pid: u32,
    pub tmux_socket: String,
    ready: AtomicBool,
    /// Set as soon as a stop is requested: no new session starts after it.
    stopping: AtomicBool,
    report: Mutex<Option<ReportView>>,
    pub events: broadcast::Sender<Event>,
    shutdown: watch::Sender<bool>,
    /// Wakes the provisioner: a window opened, or a slot was taken or released.
    pub provision: Notify,
}

impl State {
    pub fn new(
        host: Host,
        writer: Store,
        reader: Store,
        token: String,
        tmux_socket: String,
    ) -> State {
        State {
            host,
            writer: Mutex::new(writer),
            reader: Mutex::new(reader),
            token,
            pid: std::process::id(),
            tmux_socket,
            ready: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            report: Mutex::new(None),
            events: broadcast::channel(1024).0,
            shutdown: watch::channel(false).0,
            provision: Notify::new(),
        }
    }

    /// The write connection. A panic while it was held poisons nothing we rely on: SQLite keeps
    /// the data consistent, so the poison is ignored.
    pub fn writer(&self) -> MutexGuard<'_, Store> {
        self.writer.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn reader(&self) -> MutexGuard<'_, Store> {
        self.reader.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    pub fn report(&self) -> Option<ReportView> {
        self.report
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn set_report(&self, report: ReportView) {
        *self.report.lock().unwrap_or_else(|p| p.into_inner()) = Some(report);
    }

    pub fn emit(&self, event: Event) {
        // No subscriber is not an error.
        let _ = self.events.send(event);
    }

    /// Have the provisioner look at the pools now rather than at its next tick.
    pub fn provision_soon(&self) {
        self.provision.notify_one();
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Refuse new sessions from now on; the server keeps answering until `stop`.
    pub fn begin_stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Stop the server (gracefully) and every task.
    pub fn stop(&self) {
        self.begin_stop();
        self.shutdown.send_replace(true);
    }

    /// Resolves once a stop was requested.
    pub async fn stopped(&self) {
        let mut rx = self.shutdown.subscribe();
        let _ = rx.wait_for(|stop| *stop).await;
    }
}
