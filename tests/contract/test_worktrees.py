"""Worktree isolation in the store, on every backend: the task's repository and pinned
base, the worktree recorded on its attempt and its end, and limits keyed on the
repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrepos import make_repo, run
from slotline.errors import InvalidInput, NotFound, StaleAttempt
from slotline.store import Store
from slotline.worktrees.isolation import DiffStat, KeepPolicy, WorktreeState

from .conftest import ClaimFn, Clock, FinishFn, SubmitFn, titles


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def test_a_worktree_task_keeps_its_repository_and_pinned_base(
    store: Store, submit: SubmitFn, repo: Path
) -> None:
    task = submit("agent", isolation="worktree", workspace=str(repo / "."), keep="always")
    head = run(repo, "rev-parse", "HEAD")
    read = store.get(task.id)
    assert read.repo == str(repo)
    assert read.isolation is not None
    assert (read.isolation.base, read.isolation.base_commit) == ("main", head)
    assert read.isolation.keep is KeepPolicy.ALWAYS
    assert read.to_dict()["isolation"] == {
        "kind": "worktree", "base": "main", "base_commit": head, "keep": "always",
    }  # fmt: skip
    assert (task.repo, task.isolation) == (read.repo, read.isolation)  # as submit returned
    plain = store.get(submit("plain").id)
    assert (plain.repo, plain.isolation, plain.to_dict()["isolation"]) == (None, None, None)


def test_the_worktree_of_an_attempt_is_recorded_then_ended(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, repo: Path
) -> None:
    submit("agent", isolation="worktree", repo=str(repo))
    (claimed,) = claim()
    attempt = claimed.attempt
    store.record_worktree(attempt.id, attempt.token, "/w/t-1", "slotline/t-1", "c0ffee" * 6)
    tree = store.get(claimed.task.id).attempts[0].worktree
    assert tree is not None
    assert (tree.path, tree.branch, tree.state, tree.diff) == (
        "/w/t-1", "slotline/t-1", WorktreeState.ACTIVE, None,
    )  # fmt: skip
    assert [a.id for a in store.worktrees(WorktreeState.ACTIVE)] == [attempt.id]

    ended = store.end_worktree(attempt.id, WorktreeState.KEPT, DiffStat(2, 10, 3))
    assert ended.worktree is not None
    assert ended.worktree.state is WorktreeState.KEPT
    assert ended.worktree.to_dict()["diff"] == {"files": 2, "insertions": 10, "deletions": 3}
    # A later end without a measure (the worktree is gone) keeps the stat recorded.
    removed = store.end_worktree(attempt.id, WorktreeState.REMOVED, None)
    assert removed.worktree is not None
    assert removed.worktree.diff == DiffStat(2, 10, 3)
    assert store.worktrees(WorktreeState.ACTIVE) == []
    finish(claimed)
    shown = store.get(claimed.task.id).to_dict()["attempts"][0]["worktree"]
    assert shown["state"] == "removed"
    assert [e.data["state"] for e in store.events() if e.kind == "worktree"] == [
        "active", "kept", "removed",
    ]  # fmt: skip


def test_only_the_current_attempt_records_a_worktree(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, repo: Path
) -> None:
    submit("agent", isolation="worktree", repo=str(repo))
    (claimed,) = claim()
    attempt = claimed.attempt
    with pytest.raises(StaleAttempt):
        store.record_worktree(attempt.id, "wrong-token", "/w", "b", "c0ffee" * 6)
    finish(claimed)
    with pytest.raises(StaleAttempt):
        store.record_worktree(attempt.id, attempt.token, "/w", "b", "c0ffee" * 6)
    with pytest.raises(NotFound):
        store.end_worktree(attempt.id, WorktreeState.REMOVED, None)  # never had one


def test_a_repo_limit_caps_running_tasks_per_repository(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock, tmp_path: Path
) -> None:
    one = make_repo(tmp_path / "one")
    two = make_repo(tmp_path / "two")
    store.set_setting("max_concurrent", 10)
    store.set_limit("repo", str(one) + "/", 1)  # one spelling of the path
    submit("one-a", isolation="worktree", repo=str(one))
    submit("one-b", isolation="worktree", repo=str(one))
    submit("two-a", isolation="worktree", repo=str(two))
    submit("two-b", repo=str(two))  # a repository without isolation counts too
    submit("none")
    assert sorted(titles(claim())) == ["none", "one-a", "two-a", "two-b"]
    assert store.settings().to_dict()["limits"] == [
        {"key": "repo", "value": str(one), "max": 1, "origin": "api"}
    ]
    queued = store.status(now=clock.now).queued
    assert titles(queued) == ["one-b"]


def test_a_scheduled_worktree_task_counts_against_its_repository_limit(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock, repo: Path
) -> None:
    # Given a schedule whose worktree task names a subfolder of the repository
    (repo / "pkg").mkdir()
    store.set_setting("max_concurrent", 10)
    store.set_limit("repo", str(repo), 1)
    spec = {"command": ["true"], "title": "nightly", "isolation": "worktree"}
    store.add_schedule("nightly", "* * * * *", {**spec, "workspace": str(repo / "pkg")})
    submit("by-hand", isolation="worktree", repo=str(repo))
    # When it fires
    (fired,) = store.fire_schedules(now=clock.now + 120).fired
    # Then its task works on the repository's top folder, its base not pinned yet,
    # and only one of the two runs at a time
    assert fired.task is not None
    assert fired.task.repo == str(repo)
    assert fired.task.isolation is not None
    assert fired.task.isolation.base_commit is None
    assert len(claim()) == 1
    assert len(store.status(now=clock.now).queued) == 1


def test_a_schedule_of_a_worktree_task_in_no_repository_is_refused(
    store: Store, tmp_path: Path, repo: Path
) -> None:
    task = {"command": ["true"], "isolation": "worktree"}
    with pytest.raises(InvalidInput, match="does not exist"):
        store.add_schedule("gone", "* * * * *", {**task, "repo": str(tmp_path / "gone")})
    (tmp_path / "plain").mkdir()
    with pytest.raises(InvalidInput, match="not a git repository"):
        store.add_schedule("plain", "* * * * *", {**task, "repo": str(tmp_path / "plain")})
    with pytest.raises(InvalidInput, match="names no commit"):
        store.add_schedule("bad", "* * * * *", {**task, "repo": str(repo), "base": "nope"})
    assert store.schedules() == []


def test_a_merge_is_recorded_on_the_attempt_with_an_event(
    store: Store, submit: SubmitFn, claim: ClaimFn, repo: Path
) -> None:
    submit("agent", isolation="worktree", repo=str(repo))
    (claimed,) = claim()
    attempt = claimed.attempt
    store.record_worktree(attempt.id, attempt.token, "/w/t-1", "slotline/t-1", "c0ffee" * 6)
    assert store.get(claimed.task.id).attempts[0].worktree.merged is None  # type: ignore[union-attr]
    merged = store.record_merge(attempt.id, "main", "beef" * 10, squash=True)
    assert merged.worktree is not None
    assert merged.worktree.merged is not None
    assert (merged.worktree.merged.into, merged.worktree.merged.squash) == ("main", True)
    shown = store.get(claimed.task.id).to_dict()["attempts"][0]["worktree"]["merged"]
    assert (shown["into"], shown["commit"], shown["squash"]) == ("main", "beef" * 10, True)
    (event,) = [e for e in store.events() if e.kind == "merged"]
    assert event.data["into"] == "main"
    assert event.data["branch"] == "slotline/t-1"
    with pytest.raises(NotFound):
        store.record_merge("nope", "main", "beef" * 10, squash=False)


def test_an_attempt_resuming_in_a_kept_worktree_takes_it_over(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock, repo: Path
) -> None:
    # Given a first attempt whose worktree was kept after it failed,
    task = submit("agent", isolation="worktree", repo=str(repo), max_attempts=2)
    (first,) = claim()
    store.record_worktree(first.attempt.id, first.attempt.token, "/w/t-1", "b/t-1", "c0" * 20)
    store.end_worktree(first.attempt.id, WorktreeState.KEPT, None)
    finish(first, 1)
    # when the next attempt (after its retry's backoff) resumes in the same folder,
    clock.advance(3600)
    (second,) = claim()
    store.record_worktree(second.attempt.id, second.attempt.token, "/w/t-1", "b/t-1", "c0" * 20)
    # then only it holds the folder: no prune or listing sees it as the first's, kept.
    assert [a.id for a in store.worktrees(WorktreeState.ACTIVE)] == [second.attempt.id]
    assert store.worktrees(WorktreeState.KEPT) == []
    states = [a.worktree.state for a in store.get(task.id).attempts if a.worktree]
    assert states == [WorktreeState.REMOVED, WorktreeState.ACTIVE]


def test_a_prune_records_a_removal_only_from_kept_and_sees_who_works_in_a_folder(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, repo: Path
) -> None:
    submit("earlier", isolation="worktree", repo=str(repo))
    (first,) = claim()
    ea = first.attempt
    store.record_worktree(ea.id, ea.token, "/w/t-1", "slotline/t-1", "c0ffee" * 6)
    finish(first)
    # Active (its end not recorded yet): not the prune's to record.
    assert store.remove_kept_worktree(ea.id, {"pruned": "retain"}) is False
    assert [a.id for a in store.working_in("/w/t-1")] == [ea.id]
    store.end_worktree(ea.id, WorktreeState.KEPT, DiffStat(1, 2, 0))
    assert store.working_in("/w/t-1") == []
    # A follow-up takes the folder over: the earlier attempt no longer keeps it.
    submit("follow-up", isolation="worktree", repo=str(repo))
    (later,) = claim()
    la = later.attempt
    store.record_worktree(la.id, la.token, "/w/t-1", "slotline/t-1", "c0ffee" * 6)
    assert [a.id for a in store.working_in("/w/t-1")] == [la.id]
    assert store.remove_kept_worktree(ea.id, {"pruned": "retain"}) is False
    # Kept: recorded removed once, with the note on its event and the stat kept.
    store.end_worktree(la.id, WorktreeState.KEPT, None)
    assert store.remove_kept_worktree(la.id, {"pruned": "retain"}) is True
    assert store.remove_kept_worktree(la.id, {"pruned": "retain"}) is False
    tree = store.get(later.task.id).attempts[0].worktree
    assert tree is not None
    assert tree.state is WorktreeState.REMOVED
    events = [e.data for e in store.events() if e.kind == "worktree"]
    assert events[-1]["pruned"] == "retain"
    assert events[-1]["state"] == "removed"
    assert store.remove_kept_worktree("0" * 32, {}) is False
