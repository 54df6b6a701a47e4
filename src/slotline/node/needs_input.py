"""Runs that need someone: a node watches the terminals of its interactive runs. A run
whose terminal has printed nothing for its agent type's `idle_after` (default 30s) while
its process tree is idle (under `BUSY` of a core over that quiet spell: a run that
computes without printing is working, not waiting) is marked as needing input in the
store (a `needs_input` event, once per quiet spell; webhooks and command hooks hear it
as `task.needs_input`). The mark clears when the terminal prints again (an
`output_resumed` event), as when someone answered. A run adopted after a restart is
judged on what it prints from then on; the store clears the mark when the run ends."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slotline.errors import SlotlineError
from slotline.node.run import Run
from slotline.node.stall import output_progress
from slotline.node.supervisor import Supervisor
from slotline.runner.proctree import tree_cpu_seconds

log = logging.getLogger("slotline.node")

# How long a quiet terminal waits before it counts as waiting for input, when its agent
# type does not say (`idle_after`), and how busy its processes may be meanwhile (a
# fraction of one core).
DEFAULT_IDLE_AFTER = 30.0
BUSY = 0.05


@dataclass
class Quiet:
    """What the watch knows of one run's terminal: its output so far, since when it has
    been quiet, the CPU its processes had used by then, and whether it is marked."""

    size: int
    tail: int
    since: float
    cpu: float | None
    marked: bool


class InputWatch:
    """Watches the interactive runs of `supervisor`; `idle_after` per agent type."""

    def __init__(
        self,
        supervisor: Supervisor,
        idle_after: Mapping[str, float],
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.supervisor = supervisor
        self.idle_after = dict(idle_after)
        self.interval = interval
        self.clock = clock
        self._quiet: dict[str, Quiet] = {}

    async def run(self, stop: asyncio.Event) -> None:
        """Check every `interval` seconds until `stop` is set."""
        while not stop.is_set():
            try:
                await self.check()
            except Exception:  # the next round tries again; dispatch never waits on this
                log.exception("watching interactive runs failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)

    def after(self, run: Run) -> float:
        return self.idle_after.get(run.task.agent or "", DEFAULT_IDLE_AFTER)

    async def check(self) -> None:
        """One round over the node's interactive runs."""
        runs = {
            attempt_id: run
            for attempt_id, run in list(self.supervisor.runs.items())
            if run.task.interactive
        }
        for gone in set(self._quiet) - set(runs):
            del self._quiet[gone]
        for attempt_id, run in runs.items():
            if run.handle is None or run.finishing or run.stopping:
                continue
            await self._check_run(attempt_id, run)

    async def _check_run(self, attempt_id: str, run: Run) -> None:
        handle = run.handle
        assert handle is not None
        now = self.clock()
        size, tail = await asyncio.to_thread(output_progress, handle.log_path)
        cpu = await asyncio.to_thread(tree_cpu_seconds, handle.pid, handle.pid_started)
        quiet = self._quiet.get(attempt_id)
        if quiet is None:
            marked = run.task.needs_input_at is not None
            self._quiet[attempt_id] = Quiet(size, tail, now, cpu, marked)
            return
        if (size, tail) != (quiet.size, quiet.tail):
            quiet.size, quiet.tail, quiet.since, quiet.cpu = size, tail, now, cpu
            if quiet.marked:
                await self._resumed(run, quiet)
            return
        waited = now - quiet.since
        if quiet.marked or waited < self.after(run):
            return
        if cpu is not None and quiet.cpu is not None and cpu - quiet.cpu > BUSY * waited:
            # Working without printing: its quiet spell starts again from here.
            quiet.since, quiet.cpu = now, cpu
            return
        await self._needs_input(run, quiet, f"its terminal printed nothing for {waited:.0f}s")

    async def _needs_input(self, run: Run, quiet: Quiet, why: str) -> None:
        task, attempt = run.task, run.attempt
        try:
            marked = await asyncio.to_thread(
                self.supervisor.store.mark_needs_input, task.id, attempt.id, why
            )
        except SlotlineError:
            log.exception("marking a run as needing input failed", extra={"task_id": task.id})
            return
        quiet.marked = True
        if marked:
            log.info("run needs input: %s", why, extra={"task_id": task.id})

    async def _resumed(self, run: Run, quiet: Quiet) -> None:
        try:
            await asyncio.to_thread(
                self.supervisor.store.clear_needs_input, run.task.id, run.attempt.id
            )
        except SlotlineError:
            log.exception("clearing a needs-input mark failed", extra={"task_id": run.task.id})
            return
        quiet.marked = False
