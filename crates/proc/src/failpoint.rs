//! Failpoints: with the `failpoints` feature (test builds only), a step named in
//! `RECONCILE_FAILPOINT` kills this process with SIGKILL, so tests can crash it exactly there.
//! Without the feature, `hit` compiles to nothing.

/// The variable naming the step at which to die.
pub const VAR: &str = "RECONCILE_FAILPOINT";

#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    if std::env::var(VAR).is_ok_and(|v| v == name) {
        tracing::warn!(failpoint = name, "failpoint hit: killing this process");
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {}
