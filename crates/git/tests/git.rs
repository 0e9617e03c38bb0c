//! The git workspace against real repositories in temp dirs.

use std::fs;

use reconcile_core::SessionId;
use reconcile_git::{Error, Git, Preserved};
use reconcile_proc::ChildCount;
use reconcile_testkit::{repo, sh};

fn id(s: &str) -> SessionId {
    SessionId::parse(s).unwrap()
}

#[test]
fn preserves_modified_staged_and_untracked_work_without_touching_the_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let git = Git::new(ChildCount::default());
    let wt = dir.path().join("wt");
    git.add_worktree(&repo, "reconcile/s-1", &wt).unwrap();
    assert_eq!(git.preserve(&wt, &id("s-1")).unwrap(), Preserved::Clean);

    fs::write(wt.join("README"), "hello\nchanged\n").unwrap();
    fs::write(wt.join("new.txt"), "untracked\n").unwrap();
    fs::write(wt.join("staged.txt"), "staged\n").unwrap();
    fs::write(wt.join("debug.log"), "ignored\n").unwrap();
    fs::remove_file(wt.join("src/lib.txt")).unwrap();
    sh(&wt, "git add staged.txt");

    let index_path = sh(&wt, "git rev-parse --path-format=absolute --git-path index");
    let index_before = fs::read(index_path.trim()).unwrap();
    let status_before = sh(&wt, "git status --porcelain");
    let head_before = sh(&wt, "git rev-parse HEAD");

    let Preserved::Saved { reference, commit } = git.preserve(&wt, &id("s-1")).unwrap() else {
        panic!("expected saved work");
    };
    assert_eq!(reference, "refs/reconcile/preserved/s-1");

    // The ref holds every change, on top of HEAD; the ignored file is not in it.
    assert_eq!(
        sh(&repo, &format!("git rev-parse {reference}")).trim(),
        commit
    );
    assert_eq!(
        sh(&repo, &format!("git rev-parse {reference}^")),
        head_before
    );
    assert_eq!(
        sh(&repo, &format!("git show {reference}:README")),
        "hello\nchanged\n"
    );
    assert_eq!(
        sh(&repo, &format!("git show {reference}:new.txt")),
        "untracked\n"
    );
    assert_eq!(
        sh(&repo, &format!("git show {reference}:staged.txt")),
        "staged\n"
    );
    let files = sh(&repo, &format!("git ls-tree -r --name-only {reference}"));
    assert!(
        !files.contains("debug.log") && !files.contains("src/lib.txt"),
        "{files}"
    );

    // The worktree, its index and HEAD are exactly as they were.
    assert_eq!(sh(&wt, "git status --porcelain"), status_before);
    assert_eq!(fs::read(index_path.trim()).unwrap(), index_before);
    assert_eq!(sh(&wt, "git rev-parse HEAD"), head_before);
    assert_eq!(
        fs::read_to_string(wt.join("new.txt")).unwrap(),
        "untracked\n"
    );
    assert!(wt.join("debug.log").exists());
    // No temporary index is left behind.
    let git_dir = sh(&wt, "git rev-parse --path-format=absolute --git-dir");
    let leftovers: Vec<_> = fs::read_dir(git_dir.trim())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("reconcile-preserve-")
        })
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Preserving again is idempotent in effect: same tree, ref updated.
    let Preserved::Saved { commit: again, .. } = git.preserve(&wt, &id("s-1")).unwrap() else {
        panic!("expected saved work");
    };
    assert_eq!(
        sh(&repo, &format!("git rev-parse {again}^{{tree}}")),
        sh(&repo, &format!("git rev-parse {commit}^{{tree}}"))
    );
}

#[test]
fn a_missing_worktree_has_nothing_to_preserve() {
    let dir = tempfile::tempdir().unwrap();
    let git = Git::new(ChildCount::default());
    assert_eq!(
        git.preserve(&dir.path().join("gone"), &id("s-2")).unwrap(),
        Preserved::Missing
    );
}

#[test]
fn worktrees_need_a_repository_with_commits_and_a_fresh_directory() {
    let dir = tempfile::tempdir().unwrap();
    let git = Git::new(ChildCount::default());
    let plain = dir.path().join("plain");
    fs::create_dir(&plain).unwrap();
    assert!(matches!(
        git.repository_root(&plain),
        Err(Error::NotARepository { .. })
    ));
    assert!(
        git.add_worktree(&plain, "b", &dir.path().join("w1"))
            .is_err()
    );

    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    sh(&empty, "git init -q");
    let err = git
        .add_worktree(&empty, "b", &dir.path().join("w2"))
        .unwrap_err();
    assert!(matches!(err, Error::NoCommits { .. }), "{err}");

    let repo = repo(dir.path());
    assert_eq!(git.repository_root(&repo.join("src")).unwrap(), repo);
    let taken = dir.path().join("taken");
    fs::create_dir(&taken).unwrap();
    fs::write(taken.join("keep"), "mine").unwrap();
    let err = git.add_worktree(&repo, "b", &taken).unwrap_err();
    assert!(matches!(err, Error::WorktreeExists { .. }), "{err}");
    assert_eq!(fs::read_to_string(taken.join("keep")).unwrap(), "mine");

    let wt = dir.path().join("wt");
    git.add_worktree(&repo, "reconcile/s-3", &wt).unwrap();
    assert_eq!(sh(&wt, "git branch --show-current").trim(), "reconcile/s-3");
    // The branch exists: a second worktree on it is refused by git, and nothing is lost.
    assert!(
        git.add_worktree(&repo, "reconcile/s-3", &dir.path().join("wt2"))
            .is_err()
    );
}
