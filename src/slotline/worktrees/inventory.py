"""The worktrees on disk, as `slotline worktrees` lists them (task, branch, state, age,
size; another machine's without a size, marked remote), and a prune that applies the
retention policy (`prune.plan`) to this machine's: each folder removed without losing
its work (`removal.remove_folder`), and the folders no attempt holds (after a crash)
removed too unless they hold work (`worktrees.orphans`)."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotline.errors import NotFound
from slotline.models import Attempt, Task
from slotline.store import Store
from slotline.worktrees import orphans, worktree
from slotline.worktrees.isolation import Checkout, KeepPolicy, WorktreeState
from slotline.worktrees.prune import Candidate, WorktreePolicy, plan
from slotline.worktrees.removal import Fate, remove_folder

log = logging.getLogger("slotline.worktrees")


@dataclass(frozen=True, slots=True)
class Entry:
    """A run's worktree: its task and attempt, keep policy, whether it is on this
    machine (`here`) and then its size on disk (bytes), and whether its task's next
    attempt will resume in it (`resumes`: a prune leaves it)."""

    task: Task
    attempt: Attempt
    keep: KeepPolicy
    here: bool
    size: int | None
    resumes: bool = False

    def candidate(self) -> Candidate:
        tree = self.attempt.worktree
        assert tree is not None
        return Candidate(
            self.attempt.id, self.task.agent, tree.state, self.keep,
            self.attempt.finished_at, self.size or 0, tree.merged is not None, self.resumes,
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
            "remote": not self.here,
            "merged": None if tree.merged is None else tree.merged.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Pruned:
    """A worktree a prune removed (or would remove, on a dry run), why, and what became
    of its folder and branch (`Fate`)."""

    entry: Entry
    reason: str
    fate: Fate

    @property
    def removed(self) -> bool:
        return self.fate.folder == "removed"

    def to_dict(self, now: float) -> dict[str, Any]:
        return {**self.entry.to_dict(now), "reason": self.reason, **self.fate.to_dict()}


@dataclass(frozen=True, slots=True)
class Orphan:
    """A folder under this machine's worktree root that no attempt holds (after a
    crash): removed, or kept because it holds work (`note` says what)."""

    folder: Path
    size: int
    note: str | None

    @property
    def removed(self) -> bool:
        return self.note is None

    def to_dict(self, now: float) -> dict[str, Any]:
        named = worktree.parse_name(self.folder)
        return {
            "task_id": None if named is None else named[0],
            "title": None, "agent": None, "user": None,
            "attempt": None if named is None else named[1],
            "path": str(self.folder),
            "branch": None, "state": "orphan", "keep": None, "age": None, "ended_age": None,
            "size": self.size, "remote": False, "merged": None, "reason": "orphan",
            "folder_fate": "kept" if self.note else "removed", "branch_fate": None,
            "uncommitted": None, "saved_commit": None, "note": self.note,
        }  # fmt: skip


def entries(store: Store) -> list[Entry]:
    """The worktrees the store says are on disk (active or kept), oldest first, each
    with its size when it is on this machine (`worktree.here`). Blocking: it runs git."""
    found = []
    for state in (WorktreeState.ACTIVE, WorktreeState.KEPT):
        for attempt in store.worktrees(state):
            tree = attempt.worktree
            assert tree is not None
            with contextlib.suppress(NotFound):  # its task was deleted meanwhile
                task = store.get(attempt.task_id, estimate=False)
                keep = task.isolation.keep if task.isolation else KeepPolicy.ON_FAILURE
                last = max(a.number for a in task.attempts) if task.attempts else 0
                # Its next attempt (a retry, or a restart of the ended task) resumes in
                # it: kept until that attempt takes it over.
                resumes = attempt.resumable and attempt.number == last
                checkout = Checkout(task.repo or "", tree.path, tree.branch, tree.base_commit)
                here = worktree.here(checkout)
                found.append(Entry(
                    task, attempt, KeepPolicy.ALWAYS if resumes else keep, here,
                    disk_usage(tree.path) if here else None, resumes,
                ))  # fmt: skip
    return sorted(found, key=lambda e: (e.attempt.started_at, e.attempt.id))


def prune(
    store: Store,
    policy: WorktreePolicy,
    now: float,
    *,
    dry_run: bool = False,
    under: Path | None = None,
) -> list[Pruned | Orphan]:
    """Apply `policy` now to this machine's worktrees: first the folders under its
    worktree root(s) that no attempt holds (removed, or kept when they hold work: those
    count against `max_disk`), then the runs' worktrees `plan` picks (none whose run is
    on), oldest first, each folder removed with its work kept on its branch and recorded
    as removed. Blocking: it runs git.

    Args:
        dry_run: decide and report, change nothing.
        under: only this worktree root (a node prunes its own).
    """
    listed = [
        e for e in entries(store)
        if e.here and (under is None or (e.attempt.worktree is not None
                       and e.attempt.worktree.path.startswith(str(under) + os.sep)))
    ]  # fmt: skip
    roots = [under] if under is not None else orphans.roots_here(store, [
        e.attempt.worktree.path for e in listed if e.attempt.worktree is not None
    ])  # fmt: skip
    found: list[Pruned | Orphan] = []
    for root in roots:
        found.extend(_orphans(store, root, dry_run))
    unowned = sum(o.size for o in found if isinstance(o, Orphan) and o.note is not None)
    by_id = {e.attempt.id: e for e in listed}
    for removal in plan([e.candidate() for e in listed], policy, now, unowned):
        entry = by_id[removal.attempt_id]
        fate = remove_folder(store, entry.task, entry.attempt, entry.keep, removal.reason, dry_run)
        found.append(Pruned(entry, removal.reason, fate))
    return found


def _orphans(store: Store, root: Path, dry_run: bool) -> list[Orphan]:
    """The folders under `root` no attempt holds, each removed unless it holds work."""
    found = []
    for item in orphans.unheld(store, root):
        size = disk_usage(str(item.folder))
        if dry_run:
            note = None if item.checkout is not None else worktree.orphan_work(item.folder)
        else:
            note = item.clear(store, root)
            if note is None:
                log.info("removed a worktree nothing owns", extra={"path": str(item.folder)})
            elif orphans.holder(store, str(item.folder)) is not None:
                continue  # a run took it over meanwhile: not an orphan after all
        found.append(Orphan(item.folder, size, note))
    return found


def disk_usage(path: str) -> int:
    """Bytes a folder takes on disk (allocated blocks, symlinks not followed); 0 if gone."""
    total = 0
    for folder, dirs, files in os.walk(path, onerror=lambda _: None):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total
