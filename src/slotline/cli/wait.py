"""`submit --wait`: block with a live status line until a task ends; its exit code is ours."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import click
from rich.console import Console

from slotline.cli.interrupt import run_until_interrupted
from slotline.cli.plain import describe_place, duration, print_json, short_id
from slotline.client.backend import Backend
from slotline.clock import utcnow
from slotline.models import Status, Task

EXIT_INTERRUPTED = 130
EXIT_NO_CODE = 1
TICK_SECONDS = 1.0


def ended(task: Task) -> bool:
    """Nothing more happens to the task without a person: it ended, or a dependency did."""
    return task.status.terminal or task.status is Status.BLOCKED


def exit_code(task: Task) -> int:
    """0 if it succeeded; the exit code of its failed run (128+N if killed by signal N);
    1 when it ended without one (cancelled, expired, blocked, a run that never started)."""
    if task.status is Status.SUCCEEDED:
        return 0
    code = task.exit_code
    if task.status is Status.FAILED and code is not None and code != 0:
        return min(code, 255) if code > 0 else 128 + min(-code, 127)
    return EXIT_NO_CODE


def progress(task: Task, now: float) -> tuple[str, str]:
    """What the status line says: (the state, stable) and (the state with a live timer)."""
    if task.status is Status.RUNNING:
        attempt = task.attempts[-1] if task.attempts else None
        since = task.started_at or (attempt.started_at if attempt else None)
        pid = number = ""
        if attempt is not None:
            pid = f", pid {attempt.pid}" if attempt.pid else ""
            number = f" (attempt {attempt.number})" if attempt.number > 1 else ""
        live = f"running for {duration(None if since is None else now - since)}{pid}{number}"
        return f"running{number}", live
    place = describe_place(task)
    return place, place


def summary(task: Task) -> str:
    """One line on how the task ended, e.g. `task 3f2a1b2c failed after 4s: exit code 3`."""
    took = ""
    if task.started_at is not None and task.finished_at is not None:
        took = f" after {duration(task.finished_at - task.started_at)}"
    line = f"task {short_id(task.id)} {task.status}{took}"
    if task.status is Status.SUCCEEDED:
        return line
    why = task.failure_reason or task.status_reason
    return f"{line}: {why}" if why and why != task.status.value else line


class StatusLine:
    """A spinner with a live text on a terminal; elsewhere a line per change of state."""

    def __init__(self, console: Console, quiet: bool, said: str | None = None) -> None:
        self._console = console
        self._quiet = quiet
        self._last = said
        self._status = console.status("") if console.is_terminal else None

    def start(self) -> None:
        if self._status is not None:
            self._status.start()

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()

    def update(self, task: Task) -> None:
        stable, live = progress(task, utcnow())
        if self._status is not None:
            self._status.update(f"{short_id(task.id)}: {live}")
        elif stable != self._last and not self._quiet:
            self._console.print(f"{short_id(task.id)}: {stable}", highlight=False)
        self._last = stable


async def watch(store: Backend, task_id: str, update: Callable[[Task], None]) -> Task:
    """Return the task once it has ended, calling `update` on each change and each second."""
    watcher = store.watcher()
    try:
        while True:
            task = await asyncio.to_thread(store.get, task_id)
            if ended(task):
                return task
            update(task)
            await watcher.wait(TICK_SECONDS)
    finally:
        watcher.close()


def wait_for(store: Backend, task: Task, as_json: bool, announce: Callable[[], None]) -> int:
    """Call `announce` (which says the task was submitted), block until `task` ends, then
    report it; returns the exit code for the process.

    Ctrl-C stops waiting (exit 130) and leaves the task as it is.
    """
    console = Console(stderr=True, highlight=False, emoji=False)
    # In human mode `announce` says where the task is: say it again only on change.
    said = None if as_json else describe_place(task)
    line = StatusLine(console, quiet=as_json, said=said)

    def begin() -> None:
        announce()
        line.start()

    try:
        final, interrupted = run_until_interrupted(
            lambda: watch(store, task.id, line.update), first=begin
        )
    finally:
        line.stop()
    if interrupted or final is None:
        now = store.get(task.id)
        console.print(
            f"stopped waiting; task {short_id(now.id)} is {describe_place(now)} "
            f"(slotline cancel {short_id(now.id)} stops it)"
        )
        return EXIT_INTERRUPTED
    if as_json:
        print_json(final.to_dict())
    else:
        click.echo(summary(final), err=True)
    return exit_code(final)
