"""The worktrees on disk, as `slotline worktrees` lists them (task, branch, state, age,
size), and a prune that applies the retention policy (`prune.plan`) to them: each
removal through git, recorded on its attempt; a branch deleted only when nothing of it
would be lost."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotline.errors import NotFound
from slotline.isolation import GitFailed, KeepPolicy, WorktreeState, git
from slotline.landing.prune import Candidate, WorktreePolicy, plan
from slotline.models import Attempt, Task
from slotline.runner import worktree
from slotline.runner.worktree import Checkout
from slotline.store import Store

log = logging.getLogger("slotline.worktrees")


@dataclass(frozen=True, slots=True)
class Entry:
    """A run's worktree on disk: its task and attempt, branch, state, keep policy, when
    it was made and when its run ended, its size on disk (bytes) and its merge."""

    task: Task
    attempt: Attempt
    keep: KeepPolicy
    size: int

    def candidate(self) -> Candidate:
        tree = self.attempt.worktree
        assert tree is not None
        return Candidate(
            self.attempt.id, self.task.agent, tree.state, self.keep,
            self.attempt.finished_at, self.size, tree.merged is not None,
        )  # fmt: skip

    def to_dict(self, now: float) -> dict[str, Any]:
        tree = self.attempt.worktree
        assert tree is not None
        return {
            "task_id": self.task.id,
            "title": self.task.title,
            "agent": self.task.agent,
            "user": self.task.user,
            "attempt": self.attempt.number,
            "path": tree.path,
            "branch": tree.branch,
            "state": tree.state.value,
            "keep": self.keep.value,
            "age": max(0.0, now - self.attempt.started_at),
            "ended_age": None
            if self.attempt.finished_at is None
            else max(0.0, now - self.attempt.finished_at),
            "size": self.size,
            "merged": None if tree.merged is None else tree.merged.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Pruned:
    """A worktree a prune removed (or would remove, on a dry run), why, and what became
    of its branch: `deleted`, or `kept` (it holds commits merged nowhere)."""

    entry: Entry
    reason: str
    branch: str

    def to_dict(self, now: float) -> dict[str, Any]:
        return {**self.entry.to_dict(now), "reason": self.reason, "branch_fate": self.branch}


def entries(store: Store, under: Path | None = None) -> list[Entry]:
    """The worktrees the store says are on disk (active or kept), oldest first, with
    their size; only those under `under` when given (a node's own)."""
    found = []
    for state in (WorktreeState.ACTIVE, WorktreeState.KEPT):
        for attempt in store.worktrees(state):
            tree = attempt.worktree
            assert tree is not None
            if under is not None and not tree.path.startswith(str(under) + os.sep):
                continue
            with contextlib.suppress(NotFound):  # its task was deleted meanwhile
                task = store.get(attempt.task_id, estimate=False)
                keep = task.isolation.keep if task.isolation else KeepPolicy.ON_FAILURE
                last = max(a.number for a in task.attempts) if task.attempts else 0
                if attempt.resumable and attempt.number == last:
                    # Its next attempt (a retry, or a restart of the ended task) resumes in
                    # it: kept until that attempt takes it over.
                    keep = KeepPolicy.ALWAYS
                found.append(Entry(task, attempt, keep, disk_usage(tree.path)))
    return sorted(found, key=lambda e: (e.attempt.started_at, e.attempt.id))


def prune(
    store: Store,
    policy: WorktreePolicy,
    now: float,
    *,
    dry_run: bool = False,
    under: Path | None = None,
    visible: Callable[[Task], bool] | None = None,
) -> list[Pruned]:
    """Apply `policy` now: remove the worktrees `plan` picks (none whose run is on),
    oldest first, and record each as removed. A branch is deleted with its worktree
    only when every commit of it is on another local branch, or its merge is recorded,
    or its task's `keep` is `never`; else it stays. Blocking: it runs git.

    Args:
        dry_run: decide and report, change nothing.
        under: only worktrees under this folder (a node prunes its own).
        visible: only worktrees of tasks this accepts (a user prunes only their own).
    """
    listed = [e for e in entries(store, under) if visible is None or visible(e.task)]
    by_id = {e.attempt.id: e for e in listed}
    done = []
    for removal in plan([e.candidate() for e in listed], policy, now):
        entry = by_id[removal.attempt_id]
        fate = _branch_fate(entry)
        if not dry_run:
            fate = _remove(store, entry, fate)
        done.append(Pruned(entry, removal.reason, fate))
    return done


def _branch_fate(entry: Entry) -> str:
    tree = entry.attempt.worktree
    assert tree is not None
    if entry.keep is KeepPolicy.NEVER:
        return "deleted"
    repo = entry.task.repo or ""
    tip = worktree.branch_tip(repo, tree.branch) if os.path.isdir(repo) else None
    if tip is None or tip == tree.base_commit:
        return "deleted"
    if tree.merged is not None and _contains(repo, tree.merged.into, tip):
        return "deleted"  # merged, and nothing committed on it since (a follow-up's)
    try:
        holders = git(
            repo, "for-each-ref", "--contains", tip, "--format=%(refname)", "refs/heads"
        ).split()
    except GitFailed:
        return "kept"
    return "deleted" if any(ref != f"refs/heads/{tree.branch}" for ref in holders) else "kept"


def _contains(repo: str, branch: str, commit: str) -> bool:
    """Whether `branch` holds `commit`."""
    try:
        git(repo, "merge-base", "--is-ancestor", commit, f"refs/heads/{branch}")
    except GitFailed:
        return False
    return True


def _remove(store: Store, entry: Entry, fate: str) -> str:
    tree = entry.attempt.worktree
    assert tree is not None
    assert entry.task.repo is not None
    checkout = Checkout(entry.task.repo, tree.path, tree.branch, tree.base_commit)
    # The lock file sits beside the repository folders of the node's worktree root.
    root = Path(tree.path).parent.parent
    worktree.remove(root, checkout)  # deletes the branch too if it holds no commit
    tip = (
        worktree.branch_tip(checkout.repo, checkout.branch)
        if os.path.isdir(checkout.repo)
        else None
    )
    if fate == "deleted" and tip is not None:
        try:
            git(checkout.repo, "update-ref", "-d", f"refs/heads/{checkout.branch}", tip)
        except GitFailed as exc:
            log.warning("could not delete branch %s: %s", checkout.branch, exc)
            fate = "kept"
    with contextlib.suppress(NotFound):
        store.end_worktree(entry.attempt.id, WorktreeState.REMOVED, None)
    log.info(
        "pruned a worktree",
        extra={"task_id": entry.task.id, "path": tree.path, "branch": fate},
    )
    return fate


def disk_usage(path: str) -> int:
    """Bytes a folder takes on disk (allocated blocks, symlinks not followed); 0 if gone."""
    total = 0
    for folder, dirs, files in os.walk(path, onerror=lambda _: None):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total
