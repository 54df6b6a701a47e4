"""`slotline attach` and `slotline send`: an interactive run's terminal, from a shell.

`attach` runs tmux's own client on the run's session (docs/cli.md, "Interactive runs"):
what people know, with its keys (C-b d detaches; the run goes on, its slot held). A task
that has not started is waited for, its place in line shown, and attached to once its
terminal is there. `send` types a line into the run, for a supervising agent or a script.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import click
from rich.console import Console

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.interrupt import run_until_interrupted
from slotline.cli.plain import describe_place, print_json, short_id
from slotline.cli.wait import StatusLine, ended, summary
from slotline.client.backend import Backend
from slotline.errors import InvalidTransition
from slotline.models import Status, Task
from slotline.runner.terminal_input import NoSlot, retake, send_input, terminal_of
from slotline.runner.tmux import Terminal, TerminalError
from slotline.store import Store

EXIT_INTERRUPTED = 130
# How often a wait for the terminal looks again besides the store's wake-ups: a run's
# terminal appears a moment after its start is recorded.
TICK_SECONDS = 0.25


@click.command()
@click.argument("task_id", metavar="ID")
@click.option(
    "--read-only", "-r", is_flag=True, help="Watch only: what you type does not reach the run."
)
@pass_state
def attach(state: CliState, task_id: str, read_only: bool) -> int:
    """Attach this terminal to an interactive task's run.

    Detach with C-b d (tmux's keys): the run goes on and keeps its slot. A task that
    has not started yet is waited for, showing its place in line, and attached to once
    it runs. Its terminal must be on this machine (else: the dashboard's task page).
    """
    store = state.store
    task = store.get(task_id)
    if not task.interactive:
        terminal_of(task)  # says why, and how to see its output
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.UsageError(
            "attach needs a terminal; `slotline send ID TEXT` types into the run, "
            "`slotline logs -f ID` follows what it prints"
        )
    terminal = _wait_for_terminal(store, task)
    if terminal is None:
        return EXIT_INTERRUPTED
    if isinstance(terminal, Task):
        raise InvalidTransition(f"{summary(terminal)}: nothing to attach to")
    if not read_only and not _slot_for(store, store.get(task.id), terminal):
        return EXIT_INTERRUPTED
    env = {name: value for name, value in os.environ.items() if name not in ("TMUX", "TMUX_PANE")}
    subprocess.run(terminal.attach_argv(read_only), env=env, check=False)
    now = store.get(task.id)
    if now.status is Status.RUNNING and not terminal.alive():
        # The run ended (its terminal with it): say how, once its node has recorded it.
        now = _ending(store, now)
    if now.status is Status.RUNNING:
        click.echo(
            f"detached from {short_id(now.id)}; it goes on (slotline attach {short_id(now.id)} "
            "to come back)",
            err=True,
        )
    else:
        click.echo(summary(now), err=True)
    return 0


def _slot_for(store: Backend, task: Task, terminal: Terminal) -> bool:
    """A run that gave its slot back while it waited for input takes one again before
    what is typed can reach it, waiting for one to free (its limit shown); False if
    Ctrl-C came first."""
    if task.slot_released is None:
        return True
    if not isinstance(store, Store):
        raise InvalidTransition(
            f"task {short_id(task.id)} gave its slot back while it waited for input: attach "
            "on its node's machine without --url (or --read-only, or `slotline send`, which "
            "take it back through the server)"
        )
    console = Console(stderr=True, highlight=False, emoji=False)
    said = ""

    async def wait() -> bool:
        nonlocal said
        watcher = store.watcher()
        try:
            while True:
                current = await asyncio.to_thread(store.get, task.id)
                if ended(current) or current.current_attempt is None:
                    return True  # attach says it ended
                try:
                    await asyncio.to_thread(retake, current, terminal, store)
                except TerminalError:
                    return True  # it ended meanwhile: attach says so
                except NoSlot as exc:
                    if exc.limit != said:
                        said = exc.limit
                        console.print(f"waiting for a slot: {said}")
                    await watcher.wait(TICK_SECONDS * 4)
                    continue
                return True
        finally:
            watcher.close()

    click.echo(
        f"{short_id(task.id)} gave its slot back while it waited for input; taking one again",
        err=True,
    )
    found, interrupted = run_until_interrupted(wait)
    return bool(found) and not interrupted


def _ending(store: Backend, task: Task, patience: float = 10.0) -> Task:
    """The task once its end is recorded (at most `patience` seconds: else as it is)."""

    async def wait() -> Task:
        watcher = store.watcher()
        deadline = asyncio.get_running_loop().time() + patience
        try:
            while True:
                current = await asyncio.to_thread(store.get, task.id)
                left = deadline - asyncio.get_running_loop().time()
                if ended(current) or left <= 0:
                    return current
                await watcher.wait(min(TICK_SECONDS, left))
        finally:
            watcher.close()

    found, _ = run_until_interrupted(wait)
    return found or task


def _wait_for_terminal(store: Backend, task: Task) -> Terminal | Task | None:
    """The run's terminal once it is there; the task if it ended first; None if Ctrl-C."""
    console = Console(stderr=True, highlight=False, emoji=False)
    line = StatusLine(console, quiet=False, said=None)
    first = _look(task)
    if first is not None:
        return first
    click.echo(f"waiting for {short_id(task.id)} to start: {describe_place(task)}", err=True)

    async def wait() -> Terminal | Task:
        watcher = store.watcher()
        try:
            while True:
                current = await asyncio.to_thread(store.get, task.id)
                found = _look(current)
                if found is not None:
                    return found
                line.update(current)
                await watcher.wait(TICK_SECONDS)
        finally:
            watcher.close()

    line.start()
    try:
        found, interrupted = run_until_interrupted(wait)
    finally:
        line.stop()
    return None if interrupted else found


def _look(task: Task) -> Terminal | Task | None:
    """The task's terminal if it has one now, the task if it ended, else None."""
    if ended(task):
        return task
    if task.status is not Status.RUNNING:
        return None
    try:
        terminal = terminal_of(task)
    except InvalidTransition as exc:
        if "starting" in str(exc):
            return None
        raise
    return terminal if terminal.alive() else None


@click.command()
@click.argument("task_id", metavar="ID")
@click.argument("text", required=False)
@click.option("--no-enter", is_flag=True, help="Type the text without pressing Enter after it.")
@json_option
@pass_state
def send(state: CliState, task_id: str, text: str | None, no_enter: bool) -> None:
    """Type TEXT into an interactive task's run, then Enter.

    Without TEXT, the text is read from stdin (its last newline dropped). What the run
    prints back: `slotline logs ID`, or `slotline attach ID`.
    """
    if text is None:
        if sys.stdin.isatty():
            raise click.UsageError("give the TEXT to type, or pipe it on stdin")
        text = sys.stdin.read().removesuffix("\n")
    enter = not no_enter
    remote = state.remote
    if remote is not None:
        task = remote.send_input(task_id, text, enter)
    else:
        store = state.store
        assert isinstance(store, Store)  # without --url, the CLI's backend is the store
        task = store.get(task_id)
        send_input(task, text, enter, store)
    if state.json:
        print_json(task.to_dict())
        return
    what = f"{len(text)} characters" + (", then Enter" if enter else "")
    if not text:
        what = "Enter"
    click.echo(f"typed into {short_id(task.id)}: {what}")
