"""Runs that need someone: a node watches the terminals of its interactive runs. A run
whose terminal has printed nothing for its agent type's `idle_after` (default 30s) while
its process tree is idle (under `BUSY` of a core over that quiet spell: a run that
computes without printing is working, not waiting) is marked as needing input in the
store (a `needs_input` event, once per quiet spell; webhooks and command hooks hear it
as `task.needs_input`). The mark clears when the terminal prints again (an
`output_resumed` event), as when someone answered. A run adopted after a restart is
judged on what it prints from then on; the store clears the mark when the run ends.

With its type's `release_while_idle`, a run that needs input gives its slot back: its
terminal stops taking input first (tmux's `select-pane -d`: nothing typed reaches an
agent that holds no slot), then the limits stop counting it, and another task may
start. Whoever types into it takes a slot again first (`runner/terminal_input.retake`:
`send`, `attach`, the dashboard), or waits for one. A run that prints again on its own
takes its slot back at once, even over the limits (nothing else starts until the count
is back under them, as after a start now)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from slotline.errors import SlotlineError
from slotline.node.run import Run
from slotline.node.stall import every, output_progress
from slotline.node.supervisor import Supervisor
from slotline.runner.proctree import tree_cpu_seconds
from slotline.runner.tmux import Terminal, TerminalError

log = logging.getLogger("slotline.node")

# How long a quiet terminal waits before it counts as waiting for input, when its agent
# type does not say (`idle_after`), and how busy its processes may be meanwhile (a
# fraction of one core).
DEFAULT_IDLE_AFTER = 30.0
BUSY = 0.05


@dataclass(frozen=True, slots=True)
class InputRule:
    """An agent type's: how long a quiet terminal waits before it needs input, and
    whether its run gives its slot back meanwhile."""

    idle_after: float = DEFAULT_IDLE_AFTER
    release: bool = False


@dataclass
class Quiet:
    """What the watch knows of one run's terminal: its output so far, since when it has
    been quiet, the CPU its processes had used by then, and whether it is marked."""

    size: int
    tail: int
    since: float
    cpu: float | None
    marked: bool
    released: bool = False
    # What its terminal showed when it gave its slot back (a redraw shows it again).
    screen: str | None = None


class InputWatch:
    """Watches the interactive runs of `supervisor`, by the rule of each one's agent type
    (the default rule for the others)."""

    def __init__(
        self,
        supervisor: Supervisor,
        rules: Mapping[str, InputRule],
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.supervisor = supervisor
        self.rules = dict(rules)
        self.interval = interval
        self.clock = clock
        self._quiet: dict[str, Quiet] = {}

    async def run(self, stop: asyncio.Event) -> None:
        """Check every `interval` seconds until `stop` is set."""
        await every(self.interval, stop, self.check, "watching interactive runs failed")

    def rule(self, run: Run) -> InputRule:
        return self.rules.get(run.task.agent or "", InputRule())

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
            released = run.task.slot_released is not None
            self._quiet[attempt_id] = Quiet(size, tail, now, cpu, marked, released)
            return
        if (size, tail) != (quiet.size, quiet.tail):
            if quiet.released and await self._redrawn(run, quiet):
                # Its screen was only drawn again (someone attached and resized it):
                # the same question, still unanswered.
                quiet.size, quiet.tail = size, tail
                return
            quiet.size, quiet.tail, quiet.since, quiet.cpu = size, tail, now, cpu
            if quiet.marked:
                await self._resumed(run, quiet)
            return
        waited = now - quiet.since
        rule = self.rule(run)
        if quiet.marked or waited < rule.idle_after:
            return
        if cpu is not None and quiet.cpu is not None and cpu - quiet.cpu > BUSY * waited:
            # Working without printing: its quiet spell starts again from here.
            quiet.since, quiet.cpu = now, cpu
            return
        why = f"its terminal printed nothing for {waited:.0f}s"
        await self._needs_input(run, quiet, why, rule.release)

    async def _needs_input(self, run: Run, quiet: Quiet, why: str, release: bool) -> None:
        task, attempt = run.task, run.attempt
        terminal = Terminal.of(run.handle.log_path) if run.handle is not None else None
        # Someone attached who may type is answering, or reading the question: their
        # keys must not be dropped under them. The run keeps its slot.
        release = release and terminal is not None and not await self._writers(terminal)
        if release and terminal is not None:
            # Input stops before the slot goes: nothing typed meanwhile reaches the run.
            release = await self._allow(run, terminal, False)
            quiet.screen = await self._screen(terminal)
        store = self.supervisor.store
        marked = False
        try:
            marked = await asyncio.to_thread(
                store.mark_needs_input, task.id, attempt.id, why, release=release
            )
            quiet.marked = True
        except SlotlineError:
            log.exception("marking a run as needing input failed", extra={"task_id": task.id})
        finally:
            if release and not marked and terminal is not None:
                await self._allow(run, terminal, True)  # it keeps its slot: input again
        if marked:
            quiet.released = release
            held = "; it gave its slot back" if release else ""
            log.info("run needs input: %s%s", why, held, extra={"task_id": task.id})

    async def _writers(self, terminal: Terminal) -> int:
        try:
            return await asyncio.to_thread(terminal.writers)
        except TerminalError:
            return 0

    async def _screen(self, terminal: Terminal) -> str | None:
        try:
            return await asyncio.to_thread(terminal.screen)
        except TerminalError:
            return None

    async def _redrawn(self, run: Run, quiet: Quiet) -> bool:
        """Whether a run that gave its slot back shows what it showed then."""
        terminal = Terminal.of(run.handle.log_path) if run.handle is not None else None
        if terminal is None or quiet.screen is None:
            return False
        return _same(await self._screen(terminal), quiet.screen)

    async def _allow(self, run: Run, terminal: Terminal, allowed: bool) -> bool:
        try:
            await asyncio.to_thread(terminal.allow_input, allowed)
        except TerminalError:
            log.warning("its terminal is gone", extra={"task_id": run.task.id})
            return False
        return True

    async def _resumed(self, run: Run, quiet: Quiet) -> None:
        store, task, attempt = self.supervisor.store, run.task, run.attempt
        try:
            if quiet.released:
                # At work again, by itself or because someone typed (who then took a
                # slot: this changes nothing): it holds a slot, even over the limits.
                await asyncio.to_thread(store.retake_slot, task.id, attempt.id, True)
                terminal = Terminal.of(run.handle.log_path) if run.handle is not None else None
                if terminal is not None:
                    await self._allow(run, terminal, True)
                quiet.released = False
            await asyncio.to_thread(store.clear_needs_input, task.id, attempt.id)
        except SlotlineError:
            log.exception("clearing a needs-input mark failed", extra={"task_id": task.id})
            return
        quiet.marked = False


def _same(now: str | None, then: str) -> bool:
    """The same screen, but for the blank lines and spaces a resize adds or takes off."""
    if now is None:
        return False
    return [line.rstrip() for line in now.splitlines() if line.strip()] == [
        line.rstrip() for line in then.splitlines() if line.strip()
    ]
