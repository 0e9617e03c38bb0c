//! Warm-slot worktrees against real repositories: inspect, remove only what holds nothing.

use std::fs;

use reconcile_core::WorktreeSeen;
use reconcile_git::{Error, Git, HalfMade, Preserved};
use reconcile_proc::ChildCount;
use reconcile_testkit::{repo, sh};

fn seen(exists: bool, clean: bool, at_base: bool) -> WorktreeSeen {
    WorktreeSeen {
        exists,
        clean,
        at_base,
    }
}

#[test]
fn inspect_tells_clean_dirty_and_moved_apart() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let git = Git::new(ChildCount::default());
    let base = git.base_commit(&repo).unwrap();
    let wt = dir.path().join("slot");
    git.add_worktree_at(&repo, "reconcile/slot-a", &wt, &base)
        .unwrap();
    assert_eq!(git.inspect(&wt, &base).unwrap(), seen(true, true, true));

    // Ignored files are not work.
    fs::write(wt.join("x.log"), "ignored\n").unwrap();
    assert_eq!(git.inspect(&wt, &base).unwrap(), seen(true, true, true));

    fs::write(wt.join("new.txt"), "untracked\n").unwrap();
    assert_eq!(git.inspect(&wt, &base).unwrap(), seen(true, false, true));
    sh(&wt, "git add new.txt && git commit -q -m work");
    assert_eq!(git.inspect(&wt, &base).unwrap(), seen(true, true, false));

    assert_eq!(
        git.inspect(&dir.path().join("nothing"), &base).unwrap(),
        seen(false, true, true)
    );
    let plain = dir.path().join("plain");
    fs::create_dir(&plain).unwrap();
    assert_eq!(
        git.inspect(&plain, &base).unwrap(),
        seen(true, false, false)
    );
}

#[test]
fn only_clean_worktrees_and_unmoved_branches_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let git = Git::new(ChildCount::default());
    let base = git.base_commit(&repo).unwrap();
    let wt = dir.path().join("slot");
    git.add_worktree_at(&repo, "reconcile/slot-b", &wt, &base)
        .unwrap();

    // A file appears after the slot was inspected: git refuses, nothing is lost.
    fs::write(wt.join("late.txt"), "work\n").unwrap();
    assert!(git.remove_worktree(&repo, &wt).is_err());
    assert_eq!(fs::read_to_string(wt.join("late.txt")).unwrap(), "work\n");
    fs::remove_file(wt.join("late.txt")).unwrap();

    git.remove_worktree(&repo, &wt).unwrap();
    assert!(!wt.exists());
    assert!(
        git.delete_branch_at(&repo, "reconcile/slot-b", &base)
            .unwrap()
    );
    assert!(
        !git.delete_branch_at(&repo, "reconcile/slot-b", &base)
            .unwrap()
    );

    // A branch someone committed on stays.
    let wt = dir.path().join("slot2");
    git.add_worktree_at(&repo, "reconcile/slot-c", &wt, &base)
        .unwrap();
    sh(&wt, "echo more >> README && git commit -qam more");
    assert!(
        git.delete_branch_at(&repo, "reconcile/slot-c", &base)
            .is_err()
    );
    sh(
        &repo,
        "git rev-parse --verify -q refs/heads/reconcile/slot-c",
    );
}

#[test]
fn half_made_worktrees_go_unless_nothing_proves_them_ours() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let git = Git::new(ChildCount::default());
    let base = git.base_commit(&repo).unwrap();

    let wt = dir.path().join("made");
    git.add_worktree_at(&repo, "reconcile/slot-d", &wt, &base)
        .unwrap();
    fs::remove_file(wt.join("README")).unwrap(); // a checkout cut short
    assert!(git.is_registered(&repo, &wt).unwrap());
    assert_eq!(git.remove_half_made(&repo, &wt).unwrap(), HalfMade::Removed);
    assert!(!wt.exists());
    assert!(!git.is_registered(&repo, &wt).unwrap());

    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    assert_eq!(
        git.remove_half_made(&repo, &empty).unwrap(),
        HalfMade::EmptyDirRemoved
    );
    assert_eq!(
        git.remove_half_made(&repo, &empty).unwrap(),
        HalfMade::Absent
    );

    let foreign = dir.path().join("foreign");
    fs::create_dir(&foreign).unwrap();
    fs::write(foreign.join("keep.txt"), "someone's\n").unwrap();
    assert!(matches!(
        git.remove_half_made(&repo, &foreign),
        Err(Error::Unproven { .. })
    ));
    assert!(foreign.join("keep.txt").exists());
}

#[test]
fn work_in_a_slot_is_preserved_under_the_slot_ref() {
    let dir = tempfile::tempdir().unwrap();
    let repo = repo(dir.path());
    let git = Git::new(ChildCount::default());
    let wt = dir.path().join("slot");
    git.add_worktree(&repo, "reconcile/slot-e", &wt).unwrap();
    fs::write(wt.join("new.txt"), "work\n").unwrap();
    let preserved = git
        .preserve_as(&wt, "refs/reconcile/preserved/slot-e", "slot e")
        .unwrap();
    assert!(
        matches!(preserved, Preserved::Saved { ref reference, .. } if reference == "refs/reconcile/preserved/slot-e")
    );
    assert_eq!(
        sh(&repo, "git show refs/reconcile/preserved/slot-e:new.txt"),
        "work\n"
    );
}
