//! The machine as the engine sees it: the adapters and the facts of this boot and instance.

use std::time::{SystemTime, UNIX_EPOCH};

use reconcile_git::Git;
use reconcile_home::Home;
use reconcile_proc::ChildCount;
use reconcile_tmux::Tmux;

use crate::Error;

/// The adapters and identities one daemon works with.
#[derive(Clone, Debug)]
pub struct Host {
    pub home: Home,
    pub tmux: Tmux,
    pub git: Git,
    /// This boot's id (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// This state directory's instance id, from the store.
    pub instance_id: String,
    /// Every child process the adapters start is counted here.
    pub children: ChildCount,
    /// Whether orphans are stopped. Always true in the product; a test turns it off to prove
    /// that its leak check sees what reaping would have stopped.
    pub reap_orphans: bool,
}

impl Host {
    /// Adapters for `home`, tmux on `socket`, with the store's `instance_id`.
    pub fn new(home: Home, socket: &str, instance_id: String) -> Result<Host, Error> {
        let boot_id = reconcile_proc::boot_id()?;
        let children = ChildCount::default();
        Ok(Host {
            home,
            tmux: Tmux::new(socket, boot_id.clone(), children.clone()),
            git: Git::new(children.clone()),
            boot_id,
            instance_id,
            children,
            reap_orphans: true,
        })
    }
}

/// Unix milliseconds now, for row timestamps. Decisions never read it.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A fresh id for a session, window, slot or lease: 10 characters of Crockford base32 (50
/// random bits).
pub(crate) fn new_id() -> Result<String, Error> {
    const ALPHABET: &[u8] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut bytes = [0u8; 10];
    getrandom::fill(&mut bytes).map_err(|source| Error::Random { source })?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[(*b & 31) as usize] as char)
        .collect())
}
