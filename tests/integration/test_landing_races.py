"""Races between the removal of a worktree (a prune, a sweep) and a run taking the same
folder over (a resumed attempt, a follow-up), replayed deterministically: the handover
is made at a real function boundary between what the removal read and what it does,
with real git repositories and real stores (both backends)."""

from __future__ import annotations

import asyncio
import fcntl
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from gitrepos import commit_file, make_repo, run
from slotline.errors import InvalidTransition
from slotline.models import Attempt, Task
from slotline.store import Store
from slotline.worktrees import inventory, orphans, removal, repolock, verbs, worktree
from slotline.worktrees.isolate import Isolator
from slotline.worktrees.isolation import Worktree, WorktreeState
from slotline.worktrees.orphans import store_root
from slotline.worktrees.prune import WorktreePolicy
from waiting import until_async


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", {"notes.txt": "base\n"})


def _claim(store: Store, repo: Path, **more: str) -> tuple[Task, Attempt]:
    store.submit({"command": ["true"], "isolation": "worktree", "repo": str(repo), **more})
    claimed = store.claim("elsewhere").claims
    assert len(claimed) == 1
    return claimed[0].task, claimed[0].attempt


def _ended_run(store: Store, repo: Path, root: Path) -> tuple[Task, Attempt, worktree.Checkout]:
    """T: a run that committed work, ended and kept its worktree."""
    task, attempt = _claim(store, repo)
    assert task.isolation is not None
    assert task.isolation.base_commit is not None
    made = worktree.create(root, str(repo), task.isolation.base_commit, task.id, 1)
    store.record_worktree(attempt.id, attempt.token, made.path, made.branch, made.base_commit)
    commit_file(Path(made.path), "t.txt", "work of T\n")
    store.finish(attempt.id, attempt.token, 1, None)
    store.end_worktree(attempt.id, WorktreeState.KEPT, None)
    return task, attempt, made


def _crashed_run(
    store: Store, repo: Path, root: Path, exit_code: int, **more: str
) -> tuple[Attempt, worktree.Checkout]:
    """A run whose node died before closing its worktree: ended, its worktree still
    recorded active."""
    task, attempt = _claim(store, repo, **more)
    assert task.isolation is not None
    assert task.isolation.base_commit is not None
    made = worktree.create(root, str(repo), task.isolation.base_commit, task.id, 1)
    store.record_worktree(attempt.id, attempt.token, made.path, made.branch, made.base_commit)
    store.finish(attempt.id, attempt.token, exit_code, None)
    return attempt, made


def _take_over(store: Store, follower: Attempt, made: worktree.Checkout) -> None:
    """F records T's folder (as `Isolator.reopen` does) and starts writing in it."""
    store.record_worktree(follower.id, follower.token, made.path, made.branch, made.base_commit)
    (Path(made.path) / "half-done.txt").write_text("F's work in progress\n")


def _state(store: Store, attempt: Attempt) -> WorktreeState | None:
    task = store.get(attempt.task_id)
    found = next(a for a in task.attempts if a.id == attempt.id)
    return None if found.worktree is None else found.worktree.state


def test_a_prune_leaves_a_worktree_a_follow_up_took_over_after_the_plan(
    store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    _, ended, made = _ended_run(store, repo, root)
    tip = run(repo, "rev-parse", made.branch)
    _, follower = _claim(store, repo)
    real = inventory.remove_folder

    # Given a prune that has chosen T's kept worktree, and a follow-up F that takes the
    # folder over between that choice and the removal,
    def handed_over_meanwhile(*args: Any) -> removal.Fate:
        _take_over(store, follower, made)
        return real(*args)

    monkeypatch.setattr(inventory, "remove_folder", handed_over_meanwhile)
    # When the prune goes on,
    found = inventory.prune(store, WorktreePolicy(max_disk=0), 0.0, under=root)
    # Then it leaves the folder, F's work in it uncommitted, and the branch as it was,
    assert [(p.reason, p.fate.folder) for p in found if isinstance(p, inventory.Pruned)] == [
        ("max_disk", "kept")
    ]
    note = next(p for p in found if isinstance(p, inventory.Pruned)).fate.note
    assert note is not None
    assert follower.task_id[:8] in note
    assert (Path(made.path) / "half-done.txt").read_text() == "F's work in progress\n"
    assert "?? half-done.txt" in run(Path(made.path), "status", "--porcelain")
    assert run(repo, "rev-parse", made.branch) == tip
    # and F still records it active (T's handed over, not pruned).
    assert _state(store, follower) is WorktreeState.ACTIVE
    assert _state(store, ended) is WorktreeState.REMOVED
    events = [e.data for e in store.events() if e.kind == "worktree" and e.task_id == ended.task_id]
    assert not any("pruned" in e for e in events)


def test_a_sweep_leaves_a_pruned_worktree_a_follow_up_reopened_from_its_branch(
    store: Store,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    _, ended, made = _ended_run(store, repo, root)
    # Given T's worktree pruned (folder gone, branch kept, recorded removed),
    inventory.prune(store, WorktreePolicy(max_disk=0), 0.0, under=root)
    assert not Path(made.path).exists()
    assert _state(store, ended) is WorktreeState.REMOVED
    # and a follow-up F that re-creates the folder from the branch,
    _, follower = _claim(store, repo)
    worktree.reopen(root, made)
    real = orphans.unheld

    # whose record lands after a sweep read which folders are held,
    def recorded_meanwhile(*args: Any) -> list[orphans.Unheld]:
        found = real(*args)
        _take_over(store, follower, made)
        return found

    monkeypatch.setattr(orphans, "unheld", recorded_meanwhile)
    # When the sweep goes on,
    isolator = Isolator(store, tmp_path / "data" / "worktrees")
    assert isolator.sweep(set()) == 0
    # Then F's folder and its work are left.
    assert (Path(made.path) / "half-done.txt").read_text() == "F's work in progress\n"
    assert (Path(made.path) / "t.txt").exists()
    assert _state(store, follower) is WorktreeState.ACTIVE
    # It is owned: no warning of a folder nothing owns.
    assert not [r for r in caplog.records if "nothing owns" in r.getMessage()]


def test_a_resumed_run_reopens_and_records_its_worktree_holding_the_repository_lock(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    task, _, made = _ended_run(store, repo, root)
    _, follower = _claim(store, repo)
    lock_file = root / f"{Path(made.path).parent.name}.lock"
    seen: list[bool] = []

    record = store.record_worktree

    def recording(*args: Any) -> Any:
        # A prune or a sweep on this machine cannot take the lock while F records.
        with open(lock_file, "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                seen.append(True)
            else:
                fcntl.flock(other, fcntl.LOCK_UN)
                seen.append(False)
        return record(*args)

    store.record_worktree = recording  # type: ignore[method-assign]

    async def scenario() -> None:
        isolator = Isolator(store, tmp_path / "data" / "worktrees")
        earlier = Worktree(made.path, made.branch, made.base_commit, WorktreeState.KEPT)
        await isolator.reopen(task, follower, earlier, {})

    asyncio.run(scenario())
    assert seen == [True]
    assert _state(store, follower) is WorktreeState.ACTIVE


def test_merge_refuses_while_a_follow_up_works_in_the_worktree(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    run(repo, "branch", "integration")
    task, _, made = _ended_run(store, repo, root)
    _, follower = _claim(store, repo)
    _take_over(store, follower, made)
    before = run(repo, "rev-parse", "integration")
    tip = run(repo, "rev-parse", made.branch)
    # When T is merged while F still works in its worktree, it is refused, naming F,
    with pytest.raises(InvalidTransition, match=follower.task_id[:8]):
        verbs.merge(store, task.id, into="integration")
    # and nothing changed: F's work is not committed, the target has not moved.
    assert run(repo, "rev-parse", made.branch) == tip
    assert run(repo, "rev-parse", "integration") == before
    assert "?? half-done.txt" in run(Path(made.path), "status", "--porcelain")


def test_the_sweep_leaves_a_crashed_runs_worktree_its_resumed_attempt_works_in(
    store: Store, repo: Path, tmp_path: Path
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    # Given a run (keep: never) whose node died before closing its worktree (it still
    # says active), and a run resuming in that worktree,
    attempt, made = _crashed_run(store, repo, root, 0, keep="never")
    _, follower = _claim(store, repo)
    _take_over(store, follower, made)
    # When a sweep closes the crashed run's worktree by its policy (removed),
    isolator = Isolator(store, tmp_path / "data" / "worktrees")
    isolator.sweep(set())
    # Then the folder and the resumed run's work stay; the crashed run no longer holds it.
    assert (Path(made.path) / "half-done.txt").read_text() == "F's work in progress\n"
    assert _state(store, follower) is WorktreeState.ACTIVE
    assert _state(store, attempt) is WorktreeState.REMOVED


def test_a_resumed_run_cancelled_while_waiting_for_the_lock_never_keeps_it(
    store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    task, _, made = _ended_run(store, repo, root)
    _, follower = _claim(store, repo)
    waiting, released = threading.Event(), threading.Event()
    take, let_go = repolock.RepoLock.acquire, repolock.RepoLock.release

    def acquire(self: repolock.RepoLock) -> None:
        waiting.set()
        take(self)

    def release(self: repolock.RepoLock) -> None:
        let_go(self)
        released.set()

    def free() -> bool:
        with open(root / f"{Path(made.path).parent.name}.lock", "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(other, fcntl.LOCK_UN)
        return True

    async def scenario() -> None:
        # Given the repository's lock held by a prune,
        held = repolock.RepoLock(root, str(repo))
        held.acquire()
        monkeypatch.setattr(repolock.RepoLock, "acquire", acquire)
        monkeypatch.setattr(repolock.RepoLock, "release", release)
        isolator = Isolator(store, tmp_path / "data" / "worktrees")
        earlier = Worktree(made.path, made.branch, made.base_commit, WorktreeState.KEPT)
        opening = asyncio.ensure_future(isolator.reopen(task, follower, earlier, {}))
        # when the resumed run waiting for it is cancelled, then the prune lets it go,
        await until_async(waiting.is_set, what="the run waiting for the lock")
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        let_go(held)
        # the run's thread takes it once free, and lets it go at once,
        await until_async(released.is_set, what="the lock let go")
        assert free()

    asyncio.run(scenario())
    # and the run recorded nothing.
    assert _state(store, follower) is None


def test_a_resumed_run_holding_the_lock_needs_no_other_thread_of_a_full_pool(
    store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    task, _, made = _ended_run(store, repo, root)
    _, follower = _claim(store, repo)
    inside, go = threading.Event(), threading.Event()
    reopen = worktree.reopen_locked

    def reopening(checkout: worktree.Checkout) -> worktree.Checkout:
        inside.set()
        go.wait(60)
        return reopen(checkout)

    monkeypatch.setattr(worktree, "reopen_locked", reopening)

    def waiter() -> None:  # a run starting on this repository: it waits for the lock
        with repolock.repo_lock(root, str(repo)):
            pass

    async def scenario() -> None:
        # Given a node whose thread pool has two threads,
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))
        isolator = Isolator(store, tmp_path / "data" / "worktrees")
        earlier = Worktree(made.path, made.branch, made.base_commit, WorktreeState.KEPT)
        # a resumed run that holds the repository's lock,
        opening = asyncio.ensure_future(isolator.reopen(task, follower, earlier, {}))
        await until_async(inside.is_set, what="the lock taken")
        # and two runs that start meanwhile and wait for it in the pool's threads,
        waiting = [asyncio.ensure_future(asyncio.to_thread(waiter)) for _ in range(2)]
        go.set()
        # the resumed run still records its worktree, and lets the others go (a holder
        # that needed another thread of the pool would wait for ever).
        await asyncio.wait_for(opening, 60)
        await asyncio.wait_for(asyncio.gather(*waiting), 60)

    asyncio.run(scenario())
    assert _state(store, follower) is WorktreeState.ACTIVE


def test_a_worktree_taken_over_while_the_sweep_measures_it_is_not_kept_twice(
    store: Store, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = store_root(tmp_path / "data" / "worktrees", store.url)
    store.set_setting("max_concurrent", 10)
    # Given a crashed run (keep: on_failure, failed: its worktree is kept) still recorded
    # active, which a sweep closes,
    attempt, made = _crashed_run(store, repo, root, 1)
    _, follower = _claim(store, repo)
    settle = worktree.settle

    def settling(*args: Any, **kwargs: Any) -> Any:
        # when a resumed run takes the folder over just as the sweep has settled it,
        found = settle(*args, **kwargs)
        _take_over(store, follower, made)
        return found

    monkeypatch.setattr(worktree, "settle", settling)
    Isolator(store, tmp_path / "data" / "worktrees").sweep(set())
    # then only the resumed run holds it: the crashed run's record does not say kept.
    assert _state(store, follower) is WorktreeState.ACTIVE
    assert _state(store, attempt) is WorktreeState.REMOVED
    assert (Path(made.path) / "half-done.txt").exists()
