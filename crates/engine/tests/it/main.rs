//! The engine against real tmux (a private socket), real git repositories and real SQLite files.
//! One test binary; each module states what it covers.

mod crash;
mod fixture;
mod lifecycle;
mod orphans;
mod pool;
mod reconcile;
mod scale;
