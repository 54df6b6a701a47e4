"""`slotline top`: a live full-screen view of the queue, with keys to steer it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import termios
import tty
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import click
from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from slotline.cli.context import CliState, pass_state
from slotline.cli.interrupt import run_until_interrupted
from slotline.cli.plain import short_id
from slotline.cli.render import show
from slotline.cli.top_view import View, render, selectable
from slotline.client.backend import Backend
from slotline.clock import utcnow
from slotline.errors import SlotlineError
from slotline.models import Status
from slotline.runner.proctree import TreeSampler, Usage
from slotline.store import QueueStatus, Watcher

REFRESH_SECONDS = 1.0
# Escape sequences of the arrow keys (normal and application cursor mode).
ARROWS = {"\x1b[A": "up", "\x1b[B": "down", "\x1bOA": "up", "\x1bOB": "down"}
ALIASES = {"k": "up", "j": "down"}
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@click.command()
@pass_state
def top(state: CliState) -> None:
    """A live view: utilization, running agents, the line.

    Shows active of max as a bar, each running task with its runtime, pid, and the
    CPU% and RSS of its process tree, and the queued tasks with their positions.
    Keys: up/down select a task, c cancel it (asks y/n), b bump it, u/d move a queued
    task up/down one place, q quit. When stdout is not a terminal, prints one frame.
    """
    store = state.store
    # Through a server the processes run elsewhere: show what their node last recorded.
    sampler = TreeSampler() if state.remote is None else None
    console = Console(highlight=False, emoji=False)
    if not console.is_terminal:
        status = store.status(all=True)
        view = View(status, utcnow(), usage=_usage(status, sampler), interactive=False)
        show(render(view))
        return
    run_until_interrupted(lambda: Top(store, console, sampler).run())  # Ctrl-C quits too


def _usage(status: QueueStatus, sampler: TreeSampler | None) -> dict[str, Usage | None]:
    """Each running task's process tree usage: sampled now by `sampler`, or without one,
    as the task's node last recorded it."""
    usage: dict[str, Usage | None] = {}
    for task in status.running:
        attempt = task.attempts[-1] if task.attempts else None
        if attempt is None:
            continue
        if sampler is not None:
            usage[task.id] = sampler.sample(attempt.pid, attempt.pid_started)
        elif attempt.cpu_percent is not None and attempt.rss_bytes is not None:
            usage[task.id] = Usage(attempt.cpu_percent, attempt.rss_bytes, 0)
    return usage


def parse_keys(data: str) -> list[str]:
    """Split terminal input into keys: `up`, `down`, or the character typed."""
    keys: list[str] = []
    index = 0
    while index < len(data):
        arrow = ARROWS.get(data[index : index + 3])
        if arrow is not None:
            keys.append(arrow)
            index += 3
            continue
        char = data[index]
        keys.append(ALIASES.get(char, char))
        index += 1
    return keys


@contextlib.contextmanager
def keyboard(stream: TextIO) -> Iterator[int | None]:
    """The terminal in cbreak mode (keys arrive one by one, unechoed; Ctrl-C still works),
    restored on exit whatever happens; None when input is not a terminal."""
    if not stream.isatty():
        yield None
        return
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield fd
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class Top:
    """The live loop: redraw on every store change and every second; act on keys."""

    def __init__(self, store: Backend, console: Console, sampler: TreeSampler | None) -> None:
        self.store = store
        self.console = console
        self.sampler = sampler
        self.status: QueueStatus | None = None
        self.usage: dict[str, Usage | None] = {}
        self.selected: str | None = None
        self.message: Text | None = None
        self.confirm: str | None = None  # the task a pending "cancel? y/n" is about
        self.done = False
        self.keys: list[str] = []
        self.wake = asyncio.Event()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        watcher = self.store.watcher()
        watching = asyncio.create_task(self._watch(watcher))
        for signum in STOP_SIGNALS:  # leave through the same cleanup as `q`
            loop.add_signal_handler(signum, self._stop)
        try:
            with keyboard(sys.stdin) as fd, self._live() as live:
                if fd is not None:
                    loop.add_reader(fd, self._read, fd)
                try:
                    while not self.done:
                        await self._refresh()
                        live.update(self._frame(), refresh=True)
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(self.wake.wait(), REFRESH_SECONDS)
                        self.wake.clear()
                        keys, self.keys = self.keys, []
                        for key in keys:
                            await self._handle(key)
                finally:
                    if fd is not None:
                        loop.remove_reader(fd)
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching
            watcher.close()

    def _stop(self) -> None:
        self.done = True
        self.wake.set()

    def _live(self) -> Live:
        return Live(console=self.console, screen=True, auto_refresh=False, transient=True)

    async def _watch(self, watcher: Watcher) -> None:
        while True:
            if await watcher.wait(5.0):
                self.wake.set()

    def _read(self, fd: int) -> None:
        data = os.read(fd, 1024)
        if not data:  # input closed: no more keys
            asyncio.get_running_loop().remove_reader(fd)
            return
        self.keys.extend(parse_keys(data.decode(errors="replace")))
        self.wake.set()

    async def _refresh(self) -> None:
        self.status = await asyncio.to_thread(self.store.status, all=True)
        self.usage = await asyncio.to_thread(_usage, self.status, self.sampler)
        ids = selectable(self.status)
        if self.selected is not None and self.selected not in ids:
            self.selected = None

    def _frame(self) -> RenderableType:
        assert self.status is not None
        view = View(
            self.status,
            utcnow(),
            usage=self.usage,
            selected=self.selected,
            message=self.message,
            height=self.console.size.height,
        )
        return render(view)

    async def _handle(self, key: str) -> None:
        if self.confirm is not None:
            task_id, self.confirm = self.confirm, None
            if key in ("y", "Y"):
                await self._act(self.store.cancel, task_id, "cancel")
            else:
                self.message = Text(f"{short_id(task_id)} not cancelled", style="dim")
            return
        if key in ("q", "Q"):
            self.done = True
        elif key in ("up", "down"):
            self._select(-1 if key == "up" else 1)
        elif key in ("c", "b", "u", "d"):
            await self._steer(key)

    def _select(self, step: int) -> None:
        ids = selectable(self.status) if self.status is not None else []
        if not ids:
            self.selected = None
            return
        if self.selected not in ids:
            self.selected = ids[0] if step > 0 else ids[-1]
            return
        index = ids.index(self.selected) + step
        self.selected = ids[max(0, min(index, len(ids) - 1))]
        self.message = None

    async def _steer(self, key: str) -> None:
        assert self.status is not None
        task_id = self.selected
        if task_id is None:
            self.message = Text("select a task first (↑/↓)", style="yellow")
            return
        if key == "c":
            self.confirm = task_id
            self.message = Text(f"cancel {short_id(task_id)}? y/n", style="bold yellow")
        elif key == "b":
            await self._act(self.store.bump, task_id, "bump")
        else:
            position = next((t.position for t in self.status.queued if t.id == task_id), None)
            if position is None:
                self.message = Text("only a queued task moves", style="yellow")
                return
            target = position - 1 if key == "u" else position + 1
            if target < 1 or target > len(self.status.queued):
                self.message = Text(f"{short_id(task_id)} is already at that end", style="dim")
                return
            await self._act(lambda ref: self.store.move(ref, to=target), task_id, "move")

    async def _act(self, verb: Callable[[str], Any], task_id: str, name: str) -> None:
        try:
            task = await asyncio.to_thread(verb, task_id)
        except SlotlineError as exc:
            self.message = Text(f"{name}: {exc}", style="bold red")
            return
        done = {"cancel": "cancelled", "bump": "bumped", "move": "moved"}[name]
        what = f"{done} {short_id(task_id)}"
        if task.status is Status.RUNNING and name == "cancel":
            what = f"cancelling {short_id(task_id)}: its process is being stopped"
        self.message = Text(what, style="green")
