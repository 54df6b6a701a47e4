"""`into` names a branch, never a revision: `main~1` or `main@{1}` would get past the
check that no checkout has the target, and a merge recorded into one would later let a
prune delete a branch whose commits only a reflog holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrepos import commit_file, make_repo, run
from slotline.errors import InvalidInput
from slotline.store import Store
from slotline.worktrees import verbs, worktree
from slotline.worktrees.git import branch_tip
from slotline.worktrees.isolation import WorktreeState
from slotline.worktrees.orphans import store_root
from slotline.worktrees.prune import WorktreePolicy


@pytest.mark.parametrize("into", ["main~1", "main@{1}", "main^", "HEAD", "-main", "a..b"])
def test_merge_refuses_revision_syntax_in_into(store: Store, tmp_path: Path, into: str) -> None:
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    commit_file(repo, "later.txt", "later\n")  # main@{1} and main~1 name a commit now
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    task = store.submit({"command": ["true"], "isolation": "worktree", "repo": str(repo)})
    (claim,) = store.claim("elsewhere").claims
    made = worktree.create(root, str(repo), "HEAD", task.id, 1)
    store.record_worktree(
        claim.attempt.id, claim.attempt.token, made.path, made.branch, made.base_commit
    )
    commit_file(Path(made.path), "work.txt", "work\n")
    store.finish(claim.attempt.id, claim.attempt.token, 0, None)
    store.end_worktree(claim.attempt.id, WorktreeState.KEPT, None)
    refs = run(repo, "for-each-ref", "--format=%(refname) %(objectname)")

    with pytest.raises(InvalidInput, match="not a branch name"):
        verbs.merge(store, task.id, into=into)

    assert run(repo, "for-each-ref", "--format=%(refname) %(objectname)") == refs
    tree = store.get(task.id).attempts[-1].worktree
    assert tree is not None
    assert tree.merged is None


def test_branch_tip_reads_a_branch_by_name_only(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    assert branch_tip(str(repo), "main") == run(repo, "rev-parse", "main")
    assert branch_tip(str(repo), "main~0") is None
    assert branch_tip(str(repo), "main@{0}") is None
    assert branch_tip(str(repo), "nope") is None


def test_a_prune_keeps_a_branch_recorded_as_merged_into_a_revision(
    store: Store, tmp_path: Path
) -> None:
    # Given a run recorded (before `into` was checked) as merged into `main@{1}`, a
    # commit main itself has moved off (its branch's commits held only by the reflog),
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    task = store.submit({"command": ["true"], "isolation": "worktree", "repo": str(repo)})
    (claim,) = store.claim("elsewhere").claims
    made = worktree.create(root, str(repo), "HEAD", task.id, 1)
    store.record_worktree(
        claim.attempt.id, claim.attempt.token, made.path, made.branch, made.base_commit
    )
    tip = commit_file(Path(made.path), "work.txt", "work\n")
    store.finish(claim.attempt.id, claim.attempt.token, 0, None)
    store.end_worktree(claim.attempt.id, WorktreeState.KEPT, None)
    run(repo, "update-ref", "refs/heads/main", tip)
    run(repo, "reset", "-q", "--hard", "HEAD@{1}")  # main back: the work is in main@{1}
    store.record_merge(claim.attempt.id, "main@{1}", tip, False)
    # When a prune removes its folder, the branch stays.
    pruned = verbs.prune(store, WorktreePolicy(max_disk=0), 0.0)
    assert [(p["folder_fate"], p["branch_fate"]) for p in pruned] == [("removed", "kept")]
    assert branch_tip(str(repo), made.branch) == tip
