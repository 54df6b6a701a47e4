"""A node's outbox: the starts and outcomes of its runs on their way to the store, with
the dispatch loop's next claim while the loop runs (one transaction and one wake-up for
every report of a turn), else each on its own; retried while the store fails."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slotline.errors import SlotlineError, StoreError
from slotline.store import Report, StartReport, Store

log = logging.getLogger("slotline.node")
# Calls a blocking function in a thread and waits for it (`asyncio.to_thread`).
Runner = Callable[..., Awaitable[Any]]
# How long a command's start (pid, log file) may wait for a claim of the loop to ride
# with before the loop is woken for it alone: the keeper's pid file covers a node that
# dies meanwhile, and under load the next claim comes sooner.
START_RECORD_DELAY = 0.05


@dataclass(frozen=True, slots=True)
class Batch:
    """The reports a dispatch turn commits with its claim, and their waiters."""

    starts: list[tuple[StartReport, asyncio.Future[SlotlineError | None]]]
    ends: list[tuple[Report, asyncio.Future[SlotlineError | None]]]

    @property
    def started(self) -> list[StartReport]:
        return [report for report, _ in self.starts]

    @property
    def finished(self) -> list[Report]:
        return [report for report, _ in self.ends]


class Outbox:
    """Reports waiting for the loop's next claim, and the ways a report is committed."""

    def __init__(self, store: Store, changed: asyncio.Event) -> None:
        self.store = store
        # Set to wake the dispatch loop: a report waits for its claim.
        self.changed = changed
        # Whether the dispatch loop is there to commit reports with its next claim, and
        # whether the node stops (each report is then committed alone, and a failing
        # store is not waited for).
        self.dispatching = False
        self.stopping = False
        self._reports: list[tuple[Report | StartReport, asyncio.Future[SlotlineError | None]]]
        self._reports = []
        self._start_timer: asyncio.TimerHandle | None = None

    @property
    def batched(self) -> bool:
        """Whether a report now goes with the loop's next claim."""
        return self.dispatching and not self.stopping

    def take(self) -> Batch:
        """The reports waiting for a claim; give them back with `restore` if it fails."""
        pending, self._reports = self._reports, []
        return Batch(
            [(r, done) for r, done in pending if isinstance(r, StartReport)],
            [(r, done) for r, done in pending if isinstance(r, Report)],
        )

    def restore(self, batch: Batch) -> None:
        """Reports a failed claim did not commit: they go with the next one."""
        self._reports[:0] = [*batch.starts, *batch.ends]

    async def commit(self, report: Report | StartReport) -> None:
        """Commit an outcome or a start: with the dispatch loop's next claim while the
        loop runs (one transaction and one wake-up for every report of a turn, and a slot
        an outcome freed refilled in the same commit), else on its own.

        Raises:
            SlotlineError: the store refused the report (a stale attempt).
        """
        if not self.batched:
            await self.commit_alone(report)
            return
        refused = await self.enqueue(report)
        if refused is not None:
            raise refused

    def enqueue(
        self, report: Report | StartReport, wake: bool = True
    ) -> asyncio.Future[SlotlineError | None]:
        """Hand `report` to the loop's next claim; the future answers None once it is
        committed, or why it was refused. `wake`: the loop claims at once, else within
        START_RECORD_DELAY (or sooner, with whatever else wakes it)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[SlotlineError | None] = loop.create_future()
        self._reports.append((report, done))
        if wake:
            self.changed.set()
        elif self._start_timer is None:
            self._start_timer = loop.call_later(START_RECORD_DELAY, self._record_starts)
        return done

    def _record_starts(self) -> None:
        self._start_timer = None
        if any(isinstance(report, StartReport) for report, _ in self._reports):
            self.changed.set()

    async def commit_alone(self, report: Report | StartReport) -> None:
        if isinstance(report, StartReport):
            await self.with_retries(
                self.store.record_start,
                report.attempt_id,
                report.token,
                report.pid,
                report.pid_started,
                report.log_path,
                resumed_from=report.resumed_from,
            )
            return
        await self.with_retries(
            self.store.finish,
            report.attempt_id,
            report.token,
            report.exit_code,
            report.reason,
            requeue=report.requeue,
            output=report.output,
            usage=report.usage,
            session_id=report.session_id,
            resumable=report.resumable,
            denied=report.denied,
            ended_ago=report.ended_ago,
        )

    async def commit_pending(self) -> None:
        """Commit each report still waiting for the loop, on its own (the loop stopped)."""
        pending, self._reports = self._reports, []
        for report, done in pending:
            refused = None
            try:
                await self.commit_alone(report)
            except SlotlineError as exc:
                refused = exc
            if not done.done():  # its waiter may have been cancelled meanwhile
                done.set_result(refused)

    async def with_retries(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a store verb, retrying while the store itself fails (not on refusals)."""
        return await self.retrying(asyncio.to_thread, function, *args, **kwargs)

    async def retrying(
        self, run: Runner, function: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """`with_retries`, with `function` called by `run`: `asyncio.to_thread`, or the
        call to another pool of threads (`gitpool.run_worktree`)."""
        delay = 0.1
        while True:
            try:
                return await run(function, *args, **kwargs)
            except StoreError:
                if self.stopping:
                    raise
                log.warning("store unavailable; retrying in %.1fs", delay, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def close(self) -> None:
        """The node stops: commit every waiting report alone, and each later one too."""
        self.stopping = True
        if self._start_timer is not None:
            self._start_timer.cancel()
            self._start_timer = None
        await self.commit_pending()
