//! Failpoints: with the `failpoints` feature (test builds only), a step named in
//! `RECONCILE_FAILPOINT` kills this process with SIGKILL, so tests can crash it exactly there.

/// The variable naming the step at which to die.
#[cfg(feature = "failpoints")]
pub const VAR: &str = "RECONCILE_FAILPOINT";

#[cfg(feature = "failpoints")]
pub(crate) fn hit(name: &str) {
    if std::env::var(VAR).is_ok_and(|v| v == name) {
        tracing::warn!(failpoint = name, "failpoint hit: killing this process");
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn hit(_name: &str) {}
