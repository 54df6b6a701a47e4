"""Worktree isolation on a node: a run's worktree opened (and recorded on its attempt)
before its command starts, closed by the task's policy when it ends, and a sweep that
closes what a crash left open and removes worktrees whose task is gone.

Crash safety rests on two facts: a worktree's folder and branch are named after its
attempt (`worktree.place`), so a restarted node finds one its attempt never recorded; and
a worktree is closed before its attempt's outcome is committed, so an attempt that is
still live in the store may still have its worktree open, and one that has ended and
still says `active` was left by a crash (or finished by another node) and is closed by
the sweep. A worktree whose attempt is live is never touched by the sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any

from slotline.errors import NotFound, SlotlineError
from slotline.models import Attempt, Task
from slotline.runner.process import Outcome
from slotline.stops import StopKind
from slotline.store import Store
from slotline.worktrees import inventory, orphans, repolock, worktree
from slotline.worktrees.gitpool import run_worktree
from slotline.worktrees.isolation import Checkout, KeepPolicy, Worktree, WorktreeState
from slotline.worktrees.prune import WorktreePolicy

log = logging.getLogger("slotline.node")
# How often a node sweeps its worktrees (besides at its start).
SWEEP_INTERVAL = 60.0
# Calls a blocking function with a runner (`asyncio.to_thread`, `run_worktree`), retrying
# while the store fails (the outbox's `retrying`).
Retrying = Callable[..., Awaitable[Any]]


async def _once(run: Callable[..., Awaitable[Any]], function: Any, *args: Any) -> Any:
    """A `Retrying` that does not retry."""
    return await run(function, *args)


class Isolator:
    """A node's worktrees, under `root`."""

    def __init__(self, store: Store, base: Path, retrying: Retrying = _once) -> None:
        self.store = store
        self.root = orphans.store_root(base, store.url)
        # Calls a function in a thread, retrying while the store fails (the outbox's).
        self.retrying = retrying
        # Worktrees nothing owns that hold work, kept (each warned about once).
        self.kept: set[Path] = set()
        # The retention policy a prune applies after each sweep (None: none).
        self.policy: WorktreePolicy | None = None
        # Set once a run whose worktree was closed has its outcome committed (a prune
        # only removes a finished run's): the sweeper prunes soon after.
        self.closed = asyncio.Event()

    async def open(
        self,
        task: Task,
        attempt: Attempt,
        env: dict[str, str],
        earlier: Worktree | None = None,
        start_from: str | None = None,
    ) -> tuple[Checkout, str]:
        """Create the worktree of a claimed attempt (or reuse `earlier`, the worktree of
        the run whose session it resumes: `reopen`) and record it on the attempt;
        returns it and the folder the command runs in. It starts from `start_from` when
        given (the commit a resumed run was merged as), else from the task's base. `env`
        gets SLOTLINE_WORKTREE and SLOTLINE_BRANCH.

        Raises:
            WorktreeError: it could not be created (the attempt fails with the reason).
            SlotlineError: the attempt is no longer current (the worktree is removed).
        """
        if earlier is not None:
            return await self.reopen(task, attempt, earlier, env)
        assert task.repo is not None
        assert task.isolation is not None
        base = start_from or await self._base(task)
        # Not on the default pool: runs starting together must leave it to the node's
        # heartbeat and claims (`gitpool`).
        checkout = await run_worktree(
            worktree.create, self.root, task.repo, base, task.id, attempt.number
        )
        try:
            await self.retrying(
                asyncio.to_thread, self.store.record_worktree, attempt.id, attempt.token,
                checkout.path, checkout.branch, checkout.base_commit,
            )  # fmt: skip
        except SlotlineError:
            await run_worktree(worktree.remove, self.root, checkout)
            raise
        log.info(
            "worktree created" if start_from is None else "worktree created from a merge",
            extra={"task_id": task.id, "path": checkout.path, "branch": checkout.branch,
                   "base_commit": checkout.base_commit},
        )  # fmt: skip
        env.update(SLOTLINE_WORKTREE=checkout.path, SLOTLINE_BRANCH=checkout.branch)
        return checkout, worktree.workdir(checkout, task.workspace)

    async def reopen(
        self, task: Task, attempt: Attempt, earlier: Worktree, env: dict[str, str]
    ) -> tuple[Checkout, str]:
        """As `open`, for a run that resumes an earlier run's session: that run's
        worktree (and branch), recorded on this attempt too, instead of a new one.

        Raises:
            WorktreeError: it is gone (its branch too) or something else is in its place.
            SlotlineError: the attempt is no longer current.
        """
        assert task.repo is not None
        checkout = Checkout(task.repo, earlier.path, earlier.branch, earlier.base_commit)
        # Reopened and recorded under the repository's lock: a prune or a sweep, which
        # read the store again under it, sees the folder held by this run before
        # removing it (else it would remove it under the run, or commit its work).
        root, repo = Path(earlier.path).parent.parent, task.repo
        # Set when this run is cancelled while its thread waits for the lock: the thread
        # then lets the lock go as soon as it has it, reopening nothing.
        cancelled = threading.Event()

        def reopen_and_record() -> None:
            # The whole section in one worker thread: a holder of the lock that waited
            # for another thread of the pool, where runs starting on this repository
            # wait for the lock too, could wait forever. A store that fails lets the
            # lock go before the next try (`retry`), and the folder is reopened again
            # (at once: it is there).
            with repolock.repo_lock(root, repo):
                if cancelled.is_set():
                    return
                worktree.reopen_locked(checkout)
                self.store.record_worktree(
                    attempt.id, attempt.token, checkout.path, checkout.branch,
                    checkout.base_commit,
                )  # fmt: skip

        try:
            # On the worktrees' threads (`gitpool`), as a new worktree's checkout: runs
            # resuming together must leave the default pool to the heartbeat and claims.
            await self.retrying(run_worktree, reopen_and_record)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        log.info("worktree reused to resume a session", extra={"task_id": task.id})
        env.update(SLOTLINE_WORKTREE=checkout.path, SLOTLINE_BRANCH=checkout.branch)
        return checkout, worktree.workdir(checkout, task.workspace)

    async def _base(self, task: Task) -> str:
        """What an attempt's worktree starts from: the commit pinned at submit; for a
        task a schedule submitted (not pinned), the commit an earlier attempt of it
        started from, else its base (or HEAD) as it is now."""
        isolation = task.isolation
        assert isolation is not None
        if isolation.base_commit is not None:
            return isolation.base_commit
        with contextlib.suppress(SlotlineError):
            # The claimed task carries no attempts; unreadable: start from the base.
            task = await asyncio.to_thread(self.store.get, task.id, estimate=False)
        earlier = [a for a in task.attempts if a.worktree is not None]
        if earlier:
            first = min(earlier, key=lambda a: a.number).worktree
            assert first is not None
            return first.base_commit
        return isolation.base or "HEAD"

    def find(self, task: Task, attempt: Attempt) -> Checkout | None:
        """The worktree of an attempt: as recorded, else where its node would have made
        it before dying (if that folder exists), else None."""
        return orphans.checkout_of(self.root, task, attempt)

    async def close(
        self,
        task: Task,
        attempt: Attempt,
        checkout: Checkout | None,
        outcome: Outcome,
        requeue: bool = False,
        resumable: bool = False,
    ) -> None:
        """At the end of a run (before its outcome is committed): record its diff stat,
        keep or remove its worktree by the task's policy (kept whatever the policy when
        the run is `resumable`: its next attempt resumes in it). Never raises: a
        worktree left open is closed by the next sweep."""
        if attempt.worktree is not None and attempt.worktree.state is not WorktreeState.ACTIVE:
            return  # closed before its node died
        checkout = checkout or self.find(task, attempt)
        if checkout is None or task.isolation is None:
            return
        try:
            ended = await self.ending(task, outcome, requeue)
            keep = KeepPolicy.ALWAYS if resumable else task.isolation.keep
            state, diff = await run_worktree(worktree.settle, self.root, checkout, keep, ended)
            with contextlib.suppress(NotFound):  # never recorded: nothing to say
                await self.retrying(
                    asyncio.to_thread, self.store.end_worktree, attempt.id, state, diff
                )
        except Exception:
            log.exception("closing a worktree failed", extra={"task_id": task.id})

    def prune(self, now: float) -> int:
        """Apply the retention policy to this node's worktrees (those under `root`);
        how many folders it removed (blocking: call it in a worker thread)."""
        if self.policy is None or not self.root.is_dir():
            return 0
        found = inventory.prune(self.store, self.policy, now, under=self.root)
        return sum(1 for done in found if done.removed)

    async def ending(self, task: Task, outcome: Outcome, requeue: bool) -> str:
        """How a run ended, for the keep policy: succeeded, failed, or cancelled (a
        cancel, or a run that never started its command)."""
        if requeue:
            return "cancelled"
        with contextlib.suppress(SlotlineError):
            task = await asyncio.to_thread(self.store.get, task.id)  # a stop asked since
        stop = task.kill_request
        if stop is not None and stop.kind is StopKind.CANCEL:
            return "cancelled"
        if stop is None and outcome.exit_code == 0 and outcome.reason is None:
            return "succeeded"
        return "failed"

    def sweep(self, running: Collection[str]) -> int:
        """Close what a crash left open and remove what nothing owns, under `root`:
        worktrees of ended attempts still `active`, folders of attempts that never
        recorded theirs, of removed ones, and of tasks that are gone (such a folder that
        holds uncommitted work, or commits on no branch, is kept and warned about).
        Attempts in `running` (this node's) and every live attempt are left alone.
        Returns how many worktrees it closed or removed (blocking: call it in a worker
        thread)."""
        if not self.root.is_dir():
            return 0
        done = 0
        active = self.store.worktrees(WorktreeState.ACTIVE)
        for attempt in active:
            try:
                done += self._close_ended(attempt, running)
            except Exception:  # one bad worktree must not stop the sweep of the others
                log.exception("sweeping a worktree failed", extra={"task_id": attempt.task_id})
        # Read after the closes above, which may have removed some.
        for item in orphans.unheld(self.store, self.root, running):
            try:
                done += self._clear(item)
            except Exception:
                log.exception("sweeping a worktree failed", extra={"path": str(item.folder)})
        return done

    def _close_ended(self, attempt: Attempt, running: Collection[str]) -> int:
        assert attempt.worktree is not None
        if attempt.finished_at is None or attempt.id in running:
            return 0
        if not attempt.worktree.path.startswith(str(self.root) + os.sep):
            return 0  # another store's, or another machine's
        task = self.store.get(attempt.task_id)
        checkout = self.find(task, attempt)
        if checkout is None or task.isolation is None or not worktree.here(checkout):
            return 0  # (not here: a machine with the same root path made it)
        path = attempt.worktree.path

        def taken() -> bool:  # asked holding the repository's lock, before a removal
            return any(a.id != attempt.id for a in self.store.working_in(path))

        if taken():
            # A resumed attempt (its run was interrupted by a crash) or a follow-up works
            # in it now: this attempt no longer holds it, and its folder is left alone.
            self.store.end_worktree(attempt.id, WorktreeState.REMOVED, None, {"taken_over": True})
            return 1
        ended = _ended(attempt.outcome)
        state, diff = worktree.settle(self.root, checkout, task.isolation.keep, ended, taken)
        if state is WorktreeState.KEPT and taken():
            # Taken over while it was measured: the folder is the new run's alone, or a
            # prune would later judge it by this attempt's age and keep policy.
            self.store.end_worktree(attempt.id, WorktreeState.REMOVED, diff, {"taken_over": True})
            return 1
        self.store.end_worktree(attempt.id, state, diff)
        return 1

    def _clear(self, item: orphans.Unheld) -> int:
        """Remove a worktree folder no attempt holds, unless it holds work and nothing
        owns it: then it is kept, with a warning naming it (once per node) for a person
        to look at and remove."""
        folder = item.folder
        kept = item.clear(self.store, self.root)
        if kept is not None:
            if folder in self.kept or orphans.holder(self.store, str(folder)) is not None:
                return 0  # (or a run took it over meanwhile: it is owned, not to warn of)
            self.kept.add(folder)
            log.warning(
                "keeping the worktree %s, which nothing owns: %s", folder, kept,
                extra={"path": str(folder), "reason": kept},
            )  # fmt: skip
            return 0
        log.info("removed a worktree that nothing owns", extra={"path": str(folder)})
        return 1


def _ended(outcome: str | None) -> str:
    """An attempt's recorded outcome as the keep policy reads it."""
    if outcome == "succeeded":
        return "succeeded"
    if outcome in ("cancelled", "interrupted"):  # interrupted: requeued before it ran
        return "cancelled"
    return "failed"
