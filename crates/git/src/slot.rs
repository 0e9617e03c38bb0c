//! Warm-slot worktrees: what a released slot's worktree holds, and removing one only when it
//! holds nothing (clean, at its base commit) or was never finished (half-made by a crash).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use reconcile_core::WorktreeSeen;

use crate::{Error, Git};

/// What removing a half-made slot's worktree found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalfMade {
    /// git had registered it: removed with its administrative files.
    Removed,
    /// An empty directory git never registered: removed.
    EmptyDirRemoved,
    /// Nothing was on disk.
    Absent,
}

impl Git {
    /// The commit `repo`'s HEAD points at; a repository without commits is an error.
    pub fn base_commit(&self, repo: &Path) -> Result<String, Error> {
        self.head(repo)?.ok_or_else(|| Error::NoCommits {
            repo: repo.to_owned(),
        })
    }

    /// Look at a slot's worktree: does it exist, is it clean, is HEAD still `base`.
    pub fn inspect(&self, worktree: &Path, base: &str) -> Result<WorktreeSeen, Error> {
        match fs::symlink_metadata(worktree) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(WorktreeSeen {
                    exists: false,
                    clean: true,
                    at_base: true,
                });
            }
            Err(source) => {
                return Err(Error::Io {
                    path: worktree.to_owned(),
                    source,
                });
            }
            Ok(_) => {}
        }
        if worktree.join(".git").symlink_metadata().is_err() {
            // Something is there that is not a worktree: nothing proves it holds nothing.
            return Ok(WorktreeSeen {
                exists: true,
                clean: false,
                at_base: false,
            });
        }
        let mut c = self.command(worktree);
        c.args(["status", "--porcelain=v1", "--untracked-files=all", "-z"]);
        let status = self.ok(c, "read the worktree's status", worktree)?;
        let head = self.head(worktree)?;
        Ok(WorktreeSeen {
            exists: true,
            clean: status.is_empty(),
            at_base: head.as_deref() == Some(base),
        })
    }

    /// Remove a clean worktree. git itself refuses one with modified or untracked files, so a
    /// file written after [`Git::inspect`] looked is never lost.
    pub fn remove_worktree(&self, repo: &Path, worktree: &Path) -> Result<(), Error> {
        let mut c = self.command(repo);
        c.args(["worktree", "remove"]).arg(worktree);
        self.ok(c, "remove a clean worktree", repo)?;
        Ok(())
    }

    /// Delete `branch` only while it still points at `base`; `false` when there is no such
    /// branch. A branch that moved (someone committed on it) is an error and stays.
    pub fn delete_branch_at(&self, repo: &Path, branch: &str, base: &str) -> Result<bool, Error> {
        let reference = format!("refs/heads/{branch}");
        let mut c = self.command(repo);
        c.args(["rev-parse", "-q", "--verify", &reference]);
        if !self.run(c)?.status.success() {
            return Ok(false);
        }
        let mut c = self.command(repo);
        c.args(["update-ref", "-d", &reference, base]);
        self.ok(c, "delete an unused slot branch", repo)?;
        Ok(true)
    }

    /// Remove the worktree of a slot whose provisioning a crash interrupted. Such a slot was
    /// never handed out, so what is there is a (possibly partial) checkout and nothing else; but
    /// a non-empty directory git does not list as a worktree proves nothing and is kept.
    pub fn remove_half_made(&self, repo: &Path, worktree: &Path) -> Result<HalfMade, Error> {
        if self.is_registered(repo, worktree)? {
            let mut c = self.command(repo);
            c.args(["worktree", "remove", "--force"]).arg(worktree);
            self.ok(c, "remove a half-made worktree", repo)?;
            return Ok(HalfMade::Removed);
        }
        match fs::remove_dir(worktree) {
            Ok(()) => Ok(HalfMade::EmptyDirRemoved),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(HalfMade::Absent),
            Err(_) => Err(Error::Unproven {
                path: worktree.to_owned(),
            }),
        }
    }

    /// Whether git lists `worktree` among `repo`'s worktrees (whether or not it still exists).
    pub fn is_registered(&self, repo: &Path, worktree: &Path) -> Result<bool, Error> {
        let mut c = self.command(repo);
        c.args(["worktree", "list", "--porcelain", "-z"]);
        let listing = self.ok(c, "list worktrees", repo)?;
        let want = resolved(worktree);
        Ok(listing
            .split('\0')
            .filter_map(|field| field.strip_prefix("worktree "))
            .any(|path| resolved(Path::new(path)) == want))
    }
}

/// `path` with symlinks resolved as far as it exists, so two spellings of a path compare equal.
fn resolved(path: &Path) -> PathBuf {
    if let Ok(p) = fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => resolved(parent).join(name),
        _ => path.to_owned(),
    }
}
