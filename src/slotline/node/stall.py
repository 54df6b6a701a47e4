"""Stalled runs: a node watches the logs of its own runs whose agent type has a stall
rule. A run that prints nothing for `stall_after`, or whose last line of output (the
unfinished one, else the last complete one) matches the type's waiting pattern, is
marked stalled in the store (a `stalled` event, once per quiet spell), and stopped if
the type says `on_stall: terminate`; a stalled run that prints again is no longer
stalled (an `unstalled` event). A run adopted after a restart is judged on what it
prints from then on. Marks live in the store, so every surface shows them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]

from slotline.errors import InvalidTransition, NotFound, SlotlineError
from slotline.node.run import Run
from slotline.node.supervisor import Supervisor
from slotline.webhooks.config import StallRule

log = logging.getLogger("slotline.node")

# The most of a run's new output read at once to look for the waiting pattern.
READ_MAX = 64 * 1024
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@dataclass
class Spell:
    """What the watcher knows of one run: how much of its log it has seen, since when
    nothing new came, whether it is marked stalled, and the unfinished last line."""

    size: int
    quiet_since: float
    stalled: bool
    partial: str = ""
    # The mtime (ns) of the keeper's tail of output past the log's cap (0: none yet).
    tail: int = 0


class StallWatch:
    """Watches the runs of `supervisor` whose agent type has a rule in `rules`."""

    def __init__(
        self,
        supervisor: Supervisor,
        rules: Mapping[str, StallRule],
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.supervisor = supervisor
        self.rules = dict(rules)
        self.interval = interval
        self.clock = clock
        self._spells: dict[str, Spell] = {}
        self._patterns = {
            agent: re2.compile("(?m)" + rule.pattern, _OPTIONS)
            for agent, rule in self.rules.items()
            if rule.pattern
        }

    async def run(self, stop: asyncio.Event) -> None:
        """Check every `interval` seconds until `stop` is set."""
        if self.rules:
            await every(self.interval, stop, self.check, "watching for stalled runs failed")

    async def check(self) -> None:
        """One round over the node's runs."""
        runs = {run.attempt.id: run for run in list(self.supervisor.runs.values())}
        for gone in set(self._spells) - set(runs):
            del self._spells[gone]
        for attempt_id, run in runs.items():
            rule = self.rules.get(run.task.agent or "")
            if rule is None or run.handle is None or run.finishing or run.stopping:
                continue
            await self._check_run(attempt_id, run, rule, run.handle.log_path)

    async def _check_run(self, attempt_id: str, run: Run, rule: StallRule, path: Path) -> None:
        now = self.clock()
        spell = self._spells.get(attempt_id)
        size, tail = await asyncio.to_thread(output_progress, path)
        if spell is None:
            # A new run's output so far is read below (a prompt may be printed at once).
            # A run adopted after a restart starts at its log's current size: its old
            # output was the earlier node's to judge (it may already be marked); its
            # quiet spell starts now.
            start, tail_start = (size, tail) if run.adopted else (0, 0)
            spell = Spell(start, now, run.task.stalled_at is not None, tail=tail_start)
            self._spells[attempt_id] = spell
        if size != spell.size or tail != spell.tail:
            text = ""
            pattern = self._patterns.get(run.task.agent or "")
            if pattern is not None and tail != spell.tail:
                # Past the log's cap: the end of the keeper's tail is the latest output.
                text = await asyncio.to_thread(_read_end, path.with_suffix(".tail"))
                spell.partial = ""
            elif pattern is not None:
                text = await asyncio.to_thread(_read, path, spell.size, size)
            spell.size, spell.tail, spell.quiet_since = size, tail, now
            seen = spell.partial + text
            # The unfinished last line joins the next output (a prompt printed in parts).
            spell.partial = seen.rsplit("\n", 1)[-1][-1024:]
            if pattern is not None and pattern.search(_last_line(seen)):
                spell.partial = ""  # matched once: what follows is new output
                if not spell.stalled:
                    await self._stalled(run, rule, spell, "printed its waiting-for-input pattern")
            elif spell.stalled:
                await self._resumed(run, spell)
            return
        if rule.after is not None and not spell.stalled and now - spell.quiet_since >= rule.after:
            await self._stalled(run, rule, spell, f"printed nothing for {rule.after:g}s")

    async def _stalled(self, run: Run, rule: StallRule, spell: Spell, why: str) -> None:
        store = self.supervisor.store
        task, attempt = run.task, run.attempt
        try:
            marked = await asyncio.to_thread(store.mark_stalled, task.id, attempt.id, why)
        except SlotlineError:
            log.exception("marking a run stalled failed", extra={"task_id": task.id})
            return
        spell.stalled = True
        if marked:
            log.warning("run stalled: %s", why, extra={"task_id": task.id})
        if rule.terminate:
            # Only this run (checked in the terminate's transaction): never a later
            # attempt of the task, another node's after this one lost its lease.
            # Resumable: a run stopped while it waited for input keeps its session.
            stop = functools.partial(store.terminate, attempt_id=attempt.id)
            try:
                await asyncio.to_thread(stop, task.id, f"stalled: {why}", True)
            except (InvalidTransition, NotFound):  # it ended meanwhile
                return
            except SlotlineError:
                log.exception("terminating a stalled run failed", extra={"task_id": task.id})
                return
            self.supervisor.changed.set()  # the loop picks the stop up at once

    async def _resumed(self, run: Run, spell: Spell) -> None:
        store = self.supervisor.store
        try:
            await asyncio.to_thread(store.clear_stalled, run.task.id, run.attempt.id)
        except SlotlineError:
            log.exception("clearing a stalled mark failed", extra={"task_id": run.task.id})
            return
        spell.stalled = False


async def every(
    interval: float, stop: asyncio.Event, check: Callable[[], Awaitable[None]], failed: str
) -> None:
    """Run `check` every `interval` seconds until `stop` is set; one that fails is logged
    (`failed`) and the next round tries again: dispatch never waits on a watch."""
    while not stop.is_set():
        try:
            await check()
        except Exception:
            log.exception(failed)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)


def _last_line(text: str) -> str:
    """The line a run waits on, if it waits: the unfinished last one, else the last
    complete one. A prompt followed by more output was answered (or was not one)."""
    return text.rstrip("\r\n").rsplit("\n", 1)[-1][-1024:]


def output_progress(path: Path) -> tuple[int, int]:
    """The log's size, and the mtime (ns) of the keeper's tail of output past its cap
    (0 for a file that is not there): either changes while the run prints."""
    found = []
    for file in (path, path.with_suffix(".tail")):
        try:
            stat = file.stat()
        except OSError:
            found.append(0)
            continue
        found.append(stat.st_size if file == path else stat.st_mtime_ns)
    return found[0], found[1]


def _read_end(path: Path, size: int = 4096) -> str:
    """The last `size` bytes of a file as text ("" if it is not there)."""
    try:
        with path.open("rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - size))
            data: Any = file.read()
    except OSError:
        return ""
    return str(data.decode(errors="replace"))


def _read(path: Path, start: int, end: int) -> str:
    """The log's bytes from `start` to `end` (at most READ_MAX, the latest), as text;
    a log that shrank (capped, rewritten) is read from its start."""
    if end < start:
        start = 0
    start = max(start, end - READ_MAX)
    try:
        with path.open("rb") as file:
            file.seek(start)
            data: Any = file.read(end - start)
    except OSError:
        return ""
    return str(data.decode(errors="replace"))
