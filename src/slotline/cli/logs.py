"""`slotline logs`: print an attempt's output, or follow it live while the task runs."""

from __future__ import annotations

import asyncio
import codecs
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import click

from slotline.bounds import ORDINAL
from slotline.cli.context import CliState, pass_state
from slotline.cli.interrupt import run_until_interrupted
from slotline.cli.numbers import Number
from slotline.cli.plain import describe_place, printable, short_id
from slotline.client.backend import Backend
from slotline.errors import NotFound
from slotline.models import Attempt, Status, Task
from slotline.runlogs import Plain, why_no_log

if TYPE_CHECKING:
    from slotline.client.http import SlotlineClient

POLL_SECONDS = 0.2
CHUNK = 1 << 16


@click.command()
@click.argument("task_id", metavar="ID")
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing output as it is written until the task has ended "
    "(waits for a task that has not started).",
)
@click.option(
    "--attempt",
    "number",
    metavar="N",
    type=Number(ORDINAL),
    help="Attempt N (1, 2, …; default: the latest).",
)
@click.option(
    "--raw",
    is_flag=True,
    help="Keep terminal control characters as written, also on a terminal "
    "(where they are escaped by default).",
)
@pass_state
def logs(state: CliState, task_id: str, follow: bool, number: int | None, raw: bool) -> None:
    """Print the output of a task's run.

    Its stdout and stderr, byte for byte as written, of the latest attempt by default.
    On a terminal, control characters (ESC, CR, bidirectional overrides…) are shown
    escaped, as `ls` and `show` do, unless --raw is given. With --follow, new output is
    printed as it is written; a retried task is followed into its next attempt.
    """
    store, remote = state.store, state.remote
    task = store.get(task_id)
    out: Sink = sys.stdout.buffer
    if not raw and sys.stdout.isatty():
        out = Escaped(out)
    if not raw and task.interactive:
        out = Stripped(out)
    if follow and remote is not None:
        copier = _remote_copier(remote, out)
        run_until_interrupted(lambda: _follow(remote, copier, True, task, number, _note))
    elif follow:
        copier = _local_copier(out)
        run_until_interrupted(lambda: _follow(store, copier, False, task, number, _note))
    elif remote is not None:
        attempt = _pick(task, number)
        _log_path(task, attempt)  # says why there is none
        out.write(remote.log(task.id, attempt.number))
        out.flush()
    else:
        _copy(_log_file(task, _pick(task, number)), 0, out)


class Sink(Protocol):
    """Where log bytes go: stdout, or an `Escaped` stdout."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> None: ...


class Escaped:
    """Writes log bytes with terminal control characters escaped (`printable`): output
    of a run must not move a person's cursor, retitle the window or rewrite the screen.
    Decoded incrementally, so a character split between two reads stays whole; bytes
    that are not UTF-8 show as backslash-xNN."""

    def __init__(self, out: Sink) -> None:
        self._out = out
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="backslashreplace")

    def write(self, data: bytes, /) -> int:
        text = printable(self._decoder.decode(data), lines=True)
        self._out.write(text.encode("utf-8"))
        return len(data)

    def flush(self) -> None:
        self._out.flush()


class Stripped:
    """Writes an interactive run's log as text: its terminal's escape sequences taken
    out (`runlogs.Plain`); --raw keeps them, for a replay in a terminal."""

    def __init__(self, out: Sink) -> None:
        self._out = out
        self._plain = Plain()

    def write(self, data: bytes, /) -> int:
        self._out.write(self._plain.feed(data))
        return len(data)

    def flush(self) -> None:
        self._out.flush()


def _note(text: str) -> None:
    click.echo(text, err=True)


def _pick(task: Task, number: int | None) -> Attempt:
    if number is None:
        if not task.attempts:
            raise NotFound(
                f"task {short_id(task.id)} has no log yet: it is {describe_place(task)}; "
                "`slotline logs -f` waits for it to start",
                task_id=task.id,
            )
        return task.attempts[-1]
    found = _attempt(task, number)
    if found is None:
        raise NotFound(
            f"task {short_id(task.id)} has no attempt {number}; it has {len(task.attempts)}",
            task_id=task.id,
        )
    return found


def _attempt(task: Task, number: int) -> Attempt | None:
    return next((a for a in task.attempts if a.number == number), None)


def _where(task: Task, attempt: Attempt) -> str:
    return f"attempt {attempt.number} of task {short_id(task.id)}"


def _log_path(task: Task, attempt: Attempt) -> str:
    """Where the attempt's log is written (on its node), or NotFound saying why it has none."""
    if attempt.log_path is None:
        raise NotFound(why_no_log(task, attempt), task_id=task.id)
    return attempt.log_path


def _log_file(task: Task, attempt: Attempt) -> Path:
    """The attempt's log file, or NotFound saying why there is none."""
    where = _where(task, attempt)
    path = Path(_log_path(task, attempt))
    if not path.is_file():
        node = f" (it ran on node {attempt.node_id})" if attempt.node_id else ""
        raise NotFound(f"the log of {where} is missing: {path}{node}", task_id=task.id)
    return path


def _copy(path: Path, offset: int, out: Sink) -> int:
    """Write the file from `offset` on; returns the new offset."""
    with path.open("rb") as log:
        if path.stat().st_size < offset:
            offset = 0  # rewritten from the start
        log.seek(offset)
        while chunk := log.read(CHUNK):
            out.write(chunk)
            offset += len(chunk)
    out.flush()
    return offset


def _ended(task: Task) -> bool:
    return task.status.terminal or task.status is Status.BLOCKED


def _never_runs(task: Task, wanted: int, printed: bool) -> bool:
    """True when the task has ended without attempt `wanted` after output was printed: the
    follow is done. Raises NotFound if nothing was; False while it may still start."""
    if not _ended(task):
        return False
    if printed:
        return True
    raise NotFound(
        f"task {short_id(task.id)} is {describe_place(task)} and has no attempt {wanted}, "
        "so no log",
        task_id=task.id,
    )


Copier = Callable[[Task, Attempt, int], Awaitable[int | None]]


def _local_copier(out: Sink) -> Copier:
    """Copy what the log file holds past `offset`; None while the file is not there."""

    async def copy(task: Task, attempt: Attempt, offset: int) -> int | None:
        if attempt.log_path is None or not Path(attempt.log_path).exists():
            return None
        return _copy(Path(attempt.log_path), offset, out)

    return copy


def _remote_copier(client: SlotlineClient, out: Sink) -> Copier:
    """Stream the log through the server's log route; it returns when the attempt has
    ended or the stream was dropped (the next call resumes from the offset)."""
    from slotline.client.remote import follow_log

    async def copy(task: Task, attempt: Attempt, offset: int) -> int | None:
        if attempt.log_path is None:
            return None
        async for chunk in follow_log(client, task.id, attempt.number, offset):
            out.write(chunk)
            out.flush()
            offset += len(chunk)
        return offset

    return copy


async def _follow(
    source: Backend,
    copy: Copier,
    blocking: bool,
    task: Task,
    number: int | None,
    note: Callable[[str], None],
) -> None:
    """Print the attempt's log as it grows; without `number`, go on to later attempts until
    the task has ended. Output is complete: the store records an attempt as finished only
    after its process has exited, and the log is read to its end after seeing that.
    `blocking` copiers (the server's stream) wait for new output themselves."""
    wanted = number or (task.attempts[-1].number if task.attempts else 1)
    offset = 0
    printed = waiting_noted = next_attempt = False
    watcher = source.watcher()
    try:
        while True:
            task = await asyncio.to_thread(source.get, task.id)
            attempt = _attempt(task, wanted)
            if attempt is None:
                if _never_runs(task, wanted, printed):
                    return
                if not waiting_noted:
                    note(f"waiting for task {short_id(task.id)} to start ({describe_place(task)})")
                    waiting_noted = True
                await watcher.wait(1.0)
                continue
            if next_attempt:
                note(f"--- task {short_id(task.id)}: attempt {wanted} ---")
                next_attempt = False
            ended = attempt.finished_at is not None
            copied = await copy(task, attempt, offset)
            if copied is None:
                if ended:
                    _log_file(task, attempt)  # raises, saying why there is no log
                await watcher.wait(POLL_SECONDS)
                continue
            offset, printed = copied, True
            if not ended:
                if not blocking:
                    await watcher.wait(POLL_SECONDS)
                continue
            later = bool(task.attempts) and task.attempts[-1].number > wanted
            if number is not None or (_ended(task) and not later):
                return
            # A retry or restart follows (or already ran, on a busy machine the whole of it
            # may have before this read): go on with the next attempt.
            wanted, offset, waiting_noted, next_attempt = wanted + 1, 0, True, True
    finally:
        watcher.close()
