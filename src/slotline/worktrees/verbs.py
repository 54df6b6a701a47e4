"""The landing verbs over a store, as every surface calls them (CLI on a store, HTTP,
Python API): read the task, run git where its repository is, record what changed.
Blocking: they run git (call them in a worker thread from async code)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slotline.models import Task
from slotline.store import Store
from slotline.store.readback import read_back
from slotline.worktrees import inventory, removal
from slotline.worktrees.diff import DIFF_MAX_BYTES, RunDiff, latest_run, run_diff
from slotline.worktrees.merge import MergeResult, merge_run
from slotline.worktrees.prune import WorktreePolicy


def diff(
    store: Store, ref: str, stat_only: bool = False, max_bytes: int = DIFF_MAX_BYTES
) -> RunDiff:
    """The changes of the latest run of task `ref` (`run_diff`)."""
    return run_diff(store.get(ref, estimate=False), stat_only, max_bytes)


def merge(
    store: Store,
    ref: str,
    into: str | None = None,
    squash: bool = False,
    into_checkout: bool = True,
) -> tuple[MergeResult, Task]:
    """Merge the branch of the latest run of task `ref` (`merge_run`; `into_checkout`:
    whether the caller may move a checkout that has the target) and record it on its
    attempt (a `merged` event), also when the target held it already; the result and
    the task as it is now."""
    task = store.get(ref, estimate=False)
    attempt, _ = latest_run(task)
    result = merge_run(
        task, into, squash, lambda path: removal.busy(store, path, attempt.id), into_checkout
    )
    store.record_merge(attempt.id, result.into, result.commit, squash)
    return result, read_back(store.get, task)


def worktrees(
    store: Store, now: float, visible: Callable[[Task], bool] | None = None
) -> list[dict[str, Any]]:
    """The worktrees on disk as JSON (`inventory.Entry.to_dict`), oldest first: those of
    tasks `visible` accepts (default: all); another machine's without a size."""
    found = inventory.entries(store)
    return [e.to_dict(now) for e in found if visible is None or visible(e.task)]


def prune(
    store: Store, policy: WorktreePolicy, now: float, dry_run: bool = False
) -> list[dict[str, Any]]:
    """Apply the retention policy now to this machine's worktrees (`inventory.prune`):
    what was removed or kept, as JSON. Another machine's worktrees are left to a prune
    there (their folders are not here)."""
    return [p.to_dict(now) for p in inventory.prune(store, policy, now, dry_run=dry_run)]
