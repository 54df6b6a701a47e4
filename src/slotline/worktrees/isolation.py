"""Worktree isolation: the values a task and its attempts record (git itself runs in
`worktrees/git.py`; the check at submit that pins a task's base, in `worktrees/pinning.py`).

A task with `isolation: worktree` runs each attempt in a git worktree of its repository,
on a branch of its own, created from the commit the task was pinned to at submit (a
recurring schedule's task: from its base as it is when its first attempt starts;
`worktrees/worktree.py` creates, measures and removes them).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


class WorktreeState(enum.StrEnum):
    """Where a run's worktree is: in use (or its run's end not applied yet), kept on disk
    after the run, or removed (its branch stays when it holds commits)."""

    ACTIVE = "active"
    KEPT = "kept"
    REMOVED = "removed"


class KeepPolicy(enum.StrEnum):
    """What happens to a run's worktree when the run ends (docs/config.md). Whatever
    it is, a prune removes a finished run's folder past `retain` or over `max_disk`,
    keeping its work on its branch (`worktrees/removal.py`)."""

    # Kept after a failed run (for a look at what went wrong); removed after a success
    # without uncommitted changes, or a cancel.
    ON_FAILURE = "on_failure"
    ALWAYS = "always"
    # Kept after the run (removed after a cancel) until its branch is merged
    # (`slotline merge`); then the next prune removes it.
    UNTIL_MERGED = "until_merged"
    # Removed whatever the outcome, uncommitted changes with it, and its branch with
    # it: the one policy that drops a run's committed work.
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class Isolation:
    """How a task is isolated: in a worktree of `Task.repo`, from `base_commit` (pinned
    at submit); `base` is the ref it was given as, or the branch checked out then. A
    recurring schedule's task has no `base_commit`: its first attempt's worktree records
    the commit `base` (or HEAD) named when it started, and later attempts reuse it."""

    base: str | None
    base_commit: str | None
    keep: KeepPolicy = KeepPolicy.ON_FAILURE

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "worktree",
            "base": self.base,
            "base_commit": self.base_commit,
            "keep": self.keep.value,
        }


@dataclass(frozen=True, slots=True)
class DiffStat:
    """A run's changes against its base commit: committed and uncommitted work, new
    files included."""

    files: int
    insertions: int
    deletions: int

    def to_dict(self) -> dict[str, int]:
        return {"files": self.files, "insertions": self.insertions, "deletions": self.deletions}


@dataclass(frozen=True, slots=True)
class Merged:
    """A run's branch merged into `into` (`slotline merge`): the commit the target was
    moved to, when, and whether the run's commits were squashed into one."""

    into: str
    commit: str
    at: float
    squash: bool

    def to_dict(self) -> dict[str, Any]:
        at = datetime.fromtimestamp(self.at, UTC).isoformat().replace("+00:00", "Z")
        return {"into": self.into, "commit": self.commit, "at": at, "squash": self.squash}


@dataclass(frozen=True, slots=True)
class Worktree:
    """An attempt's worktree: its folder, its branch, the commit it started from, its
    state, once the run ended its diff stat, and once landed its merge."""

    path: str
    branch: str
    base_commit: str
    state: WorktreeState
    diff: DiffStat | None = None
    merged: Merged | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "branch": self.branch,
            "base_commit": self.base_commit,
            "state": self.state.value,
            "diff": None if self.diff is None else self.diff.to_dict(),
            "merged": None if self.merged is None else self.merged.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Checkout:
    """A run's worktree as git sees it: its repository, folder, branch and base commit."""

    repo: str
    path: str
    branch: str
    base_commit: str
