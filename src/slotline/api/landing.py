"""The landing verbs in the Python API: `queue.landing` on an async `Queue` (the same
blocking on a `SyncQueue`: `sync.SyncLanding`). Git runs in this process, where the
store's repositories are.

Example:
    async with slotline.open_queue("slotline.db") as queue:
        print((await queue.landing.diff(task_id)).text)
        result, task = await queue.landing.merge(task_id, into="main")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from slotline.clock import utcnow
from slotline.models import Task
from slotline.pacing.rates import parse_period
from slotline.worktrees import verbs
from slotline.worktrees.diff import DIFF_MAX_BYTES, RunDiff
from slotline.worktrees.gitpool import run_git
from slotline.worktrees.merge import MergeResult
from slotline.worktrees.prune import WorktreePolicy, parse_size

if TYPE_CHECKING:
    from slotline.store import Store


class Landing:
    """Review and land worktree runs (docs/coding-agents.md); each call runs in a
    worker thread."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def diff(
        self, ref: str, stat_only: bool = False, max_bytes: int = DIFF_MAX_BYTES
    ) -> RunDiff:
        """The latest run's changes against its base commit.

        Raises:
            InvalidInput: the task does not run in worktrees.
            InvalidTransition: no worktree yet, or its worktree and branch are gone.
        """
        return await run_git(verbs.diff, self.store, ref, stat_only, max_bytes)

    async def merge(
        self, ref: str, into: str | None = None, squash: bool = False
    ) -> tuple[MergeResult, Task]:
        """Merge the latest run's branch into `into` (default: the branch the task
        started from) without touching any checkout; the result and the task now.

        Raises:
            MergeConflict: conflicting files in `details["files"]`; nothing changed.
            InvalidTransition: running, uncommitted work, nothing committed, target
                checked out or moved meanwhile; nothing changed.
            InvalidInput: no target branch.
        """
        return await run_git(verbs.merge, self.store, ref, into, squash)

    async def worktrees(self) -> list[dict[str, Any]]:
        """The worktrees on disk, oldest first (as `slotline worktrees --json`)."""
        return await run_git(verbs.worktrees, self.store, utcnow())

    async def prune(
        self,
        retain: str | float | None = None,
        max_disk: str | int | None = None,
        dry_run: bool = False,
        *,
        agent_retain: Mapping[str, str | float] | None = None,
        agent_max_disk: Mapping[str, str | int] | None = None,
    ) -> list[dict[str, Any]]:
        """Apply a retention policy now (`retain`: `3d` or seconds; `max_disk`: `20GB` or
        bytes; per agent type, as slotline.yaml's `agents.NAME.retain` and `max_disk`,
        a type's cap counting only its own worktrees); what was removed (as `slotline
        worktrees prune --json`'s `pruned`).

        Raises:
            InvalidInput: a malformed period or size.
        """
        policy = WorktreePolicy(
            None if retain is None else parse_period(retain),
            None if max_disk is None else parse_size(max_disk),
            {agent: parse_period(value) for agent, value in (agent_retain or {}).items()},
            {agent: parse_size(value) for agent, value in (agent_max_disk or {}).items()},
        )
        return await run_git(verbs.prune, self.store, policy, utcnow(), dry_run)
