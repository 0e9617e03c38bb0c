//! End-to-end tests of the real binaries. One test binary; each module states what it covers.

mod api;
mod chaos;
mod cli;
mod daemon;
mod orphans;
mod secrets;
mod takeover;
mod windows;
