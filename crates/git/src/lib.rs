//! The git workspace: a worktree on a new branch for each session, and the capture of
//! uncommitted work into `refs/reconcile/preserved/<session-id>`.
//!
//! Capturing never changes the worktree, its index or HEAD: it stages into a temporary copy of
//! the index. No function here deletes a worktree or any file in one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use reconcile_core::SessionId;
use reconcile_proc::ChildCount;

mod slot;

pub use slot::HalfMade;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Run(#[from] reconcile_proc::Error),
    #[error("git could not {action} in {dir}: {message}")]
    Git {
        action: &'static str,
        dir: PathBuf,
        message: String,
    },
    #[error("{path} is not a git repository")]
    NotARepository { path: PathBuf },
    #[error("the repository {repo} has no commits yet; commit something to start sessions from")]
    NoCommits { repo: PathBuf },
    #[error("{path} already exists; a new worktree needs a fresh directory")]
    WorktreeExists { path: PathBuf },
    #[error(
        "{path} is neither a worktree git knows nor empty; it was kept, as nothing proves it was \
         ours to remove"
    )]
    Unproven { path: PathBuf },
    #[error("cannot use {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
}

/// What capturing a worktree's uncommitted work found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preserved {
    /// Nothing uncommitted: no ref was written.
    Clean,
    /// The work is in `reference`, a commit whose parent is the worktree's HEAD.
    Saved { reference: String, commit: String },
    /// The worktree directory does not exist: there is nothing to capture.
    Missing,
    /// The directory exists but never became a worktree (its creation was interrupted before
    /// git wrote `.git`): nothing was ever checked out or committed there.
    NotAWorktree,
}

/// git, run as a child process with a deadline.
#[derive(Clone, Debug)]
pub struct Git {
    timeout: Duration,
    children: ChildCount,
}

impl Git {
    pub fn new(children: ChildCount) -> Git {
        Git {
            timeout: Duration::from_secs(120),
            children,
        }
    }

    fn command(&self, dir: &Path) -> Command {
        let mut c = Command::new("git");
        c.arg("-C").arg(dir);
        for var in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            "GIT_NAMESPACE",
            "GIT_COMMON_DIR",
        ] {
            c.env_remove(var);
        }
        c.env("GIT_TERMINAL_PROMPT", "0");
        c
    }

    fn run(&self, mut command: Command) -> Result<Output, Error> {
        Ok(reconcile_proc::run(
            &mut command,
            self.timeout,
            &self.children,
        )?)
    }

    /// Run and return trimmed stdout, or the error git printed.
    fn ok(&self, command: Command, action: &'static str, dir: &Path) -> Result<String, Error> {
        let output = self.run(command)?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(Error::Git {
                action,
                dir: dir.to_owned(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            })
        }
    }

    /// The top directory of the work tree that contains `path`.
    pub fn repository_root(&self, path: &Path) -> Result<PathBuf, Error> {
        let mut c = self.command(path);
        c.args(["rev-parse", "--show-toplevel"]);
        let output = self.run(c)?;
        let top = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        if !output.status.success() || top.is_empty() {
            return Err(Error::NotARepository {
                path: path.to_owned(),
            });
        }
        Ok(PathBuf::from(top))
    }

    /// The commit HEAD points at, or `None` for a repository without commits.
    fn head(&self, dir: &Path) -> Result<Option<String>, Error> {
        let mut c = self.command(dir);
        c.args(["rev-parse", "-q", "--verify", "HEAD^{commit}"]);
        let output = self.run(c)?;
        match output.status.code() {
            Some(0) => Ok(Some(
                String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            )),
            Some(1) => Ok(None),
            _ => Err(Error::Git {
                action: "read HEAD",
                dir: dir.to_owned(),
                message: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            }),
        }
    }

    /// Create a worktree at `path` on a new `branch` starting from the repository's HEAD.
    pub fn add_worktree(&self, repo: &Path, branch: &str, path: &Path) -> Result<(), Error> {
        self.add_worktree_at(repo, branch, path, "HEAD")
    }

    /// Create a worktree at `path` on a new `branch` starting at `start` (a commit or `HEAD`).
    pub fn add_worktree_at(
        &self,
        repo: &Path,
        branch: &str,
        path: &Path,
        start: &str,
    ) -> Result<(), Error> {
        if path.symlink_metadata().is_ok() {
            return Err(Error::WorktreeExists {
                path: path.to_owned(),
            });
        }
        if self.head(repo)?.is_none() {
            return Err(Error::NoCommits {
                repo: repo.to_owned(),
            });
        }
        let mut c = self.command(repo);
        c.args(["worktree", "add", "-q", "-b", branch])
            .arg(path)
            .arg(start);
        self.ok(c, "create a worktree", repo)?;
        Ok(())
    }

    /// Capture the uncommitted work of `worktree` (modified, staged and untracked files; not
    /// ignored ones) as a commit on top of its HEAD, at `refs/reconcile/preserved/<session>`.
    pub fn preserve(&self, worktree: &Path, session: &SessionId) -> Result<Preserved, Error> {
        self.preserve_as(
            worktree,
            &session.preserved_ref(),
            &format!("session {session}"),
        )
    }

    /// [`Git::preserve`] into any `reference`; `label` names whose work it is in the message.
    pub fn preserve_as(
        &self,
        worktree: &Path,
        reference: &str,
        label: &str,
    ) -> Result<Preserved, Error> {
        match fs::metadata(worktree) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Preserved::Missing),
            Err(source) => {
                return Err(Error::Io {
                    path: worktree.to_owned(),
                    source,
                });
            }
            Ok(_) => {}
        }
        if matches!(worktree.join(".git").symlink_metadata(), Err(e) if e.kind() == io::ErrorKind::NotFound)
        {
            return Ok(Preserved::NotAWorktree);
        }
        let head = self.head(worktree)?;

        // Stage everything into a copy of the index, next to it, so the real one is untouched.
        let mut c = self.command(worktree);
        c.args(["rev-parse", "--path-format=absolute", "--git-path", "index"]);
        let index = PathBuf::from(self.ok(c, "find the index", worktree)?);
        let index_dir = index.parent().unwrap_or(worktree);
        let temp = tempfile::Builder::new()
            .prefix("reconcile-preserve-")
            .suffix(".index")
            .tempfile_in(index_dir)
            .map_err(|source| Error::Io {
                path: index_dir.to_owned(),
                source,
            })?;
        match fs::copy(&index, temp.path()) {
            Ok(_) => {}
            // No index yet: start from an empty one (git treats an empty file as invalid).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let _ = fs::remove_file(temp.path());
            }
            Err(source) => {
                return Err(Error::Io {
                    path: index,
                    source,
                });
            }
        }

        let mut c = self.command(worktree);
        c.env("GIT_INDEX_FILE", temp.path())
            .args(["add", "-A", "--", "."]);
        self.ok(c, "stage uncommitted work", worktree)?;
        let mut c = self.command(worktree);
        c.env("GIT_INDEX_FILE", temp.path()).arg("write-tree");
        let tree = self.ok(c, "write the preserved tree", worktree)?;

        if let Some(head) = &head {
            let mut c = self.command(worktree);
            c.args(["rev-parse", &format!("{head}^{{tree}}")]);
            if self.ok(c, "read HEAD's tree", worktree)? == tree {
                return Ok(Preserved::Clean);
            }
        }

        let message = format!("reconcile: preserved work of {label}");
        let mut c = self.command(worktree);
        c.args(["commit-tree", &tree, "-m", &message]);
        if let Some(head) = &head {
            c.args(["-p", head]);
        }
        for (var, value) in [
            ("GIT_AUTHOR_NAME", "Reconcile"),
            ("GIT_AUTHOR_EMAIL", "reconcile@localhost"),
            ("GIT_COMMITTER_NAME", "Reconcile"),
            ("GIT_COMMITTER_EMAIL", "reconcile@localhost"),
        ] {
            c.env(var, value);
        }
        let commit = self.ok(c, "commit the preserved tree", worktree)?;

        let mut c = self.command(worktree);
        c.args(["update-ref", "-m", &message, reference, &commit]);
        self.ok(c, "write the preserved ref", worktree)?;
        tracing::info!(of = label, reference, "preserved uncommitted work");
        Ok(Preserved::Saved {
            reference: reference.to_owned(),
            commit,
        })
    }
}
