"""Typing into an interactive run from outside it (`slotline send`, the API's input): the
task's terminal, the slot a run that gave its back takes again first (`retake`), and the
text typed, then Enter.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from slotline.errors import InvalidInput, InvalidTransition
from slotline.models import Status, Task
from slotline.runner.tmux import InputOff, Terminal, TerminalError

if TYPE_CHECKING:
    from slotline.store import Store

# How long a `send` that finds the run's input off (its slot being given back) tries
# again.
INPUT_OFF_PATIENCE = 5.0


class NoSlot(InvalidTransition):
    """A run that gave its slot back cannot take one again now: `limit` says which limit
    keeps it out."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


# The most text one `send` types (a pasted answer, a prompt; not a file).
MAX_INPUT = 64 * 1024


def terminal_of(task: Task) -> Terminal:
    """The terminal of the task's running attempt, on this machine.

    Raises:
        InvalidInput: the task is not interactive.
        InvalidTransition: it has no live terminal now (not started, ended, starting, or
            running on another machine); the message says which.
    """
    short = task.id[:8]
    if not task.interactive:
        raise InvalidInput(
            f"task {short} is not interactive: it runs without a terminal (its output: "
            f"slotline logs {short}); submit with --interactive, or an agent type with "
            "interactive: true"
        )
    if task.status.terminal:
        raise InvalidTransition(f"task {short} has ended ({task.status}): its terminal is gone")
    if task.status is not Status.RUNNING:
        raise InvalidTransition(f"task {short} is {task.status}: it has no terminal until it runs")
    attempt = task.attempts[-1] if task.attempts else None
    if attempt is None or not attempt.log_path:
        raise InvalidTransition(f"task {short} is starting: its terminal is not there yet")
    terminal = Terminal.of(attempt.log_path)
    if terminal is None:
        node = f"node {attempt.node_id}" if attempt.node_id else "another node"
        raise InvalidTransition(
            f"task {short} runs on {node}, whose terminals are not on this machine: "
            "attach or send there (or through that node's server)"
        )
    return terminal


def send_input(task: Task, text: str, enter: bool = True, store: Store | None = None) -> None:
    """Type `text` (then Enter, unless `enter` is false) into the task's run. A run that
    gave its slot back while it waited (`release_while_idle`) takes one again in `store`
    first: without one free, nothing is typed.

    Raises:
        InvalidInput: the task is not interactive, or the text is too long or has a NUL.
        InvalidTransition: it has no terminal now (`terminal_of`), it just ended, or it
            cannot take a slot again now (the limit that keeps it out, in words).
    """
    if len(text.encode()) > MAX_INPUT:
        raise InvalidInput(f"text: at most {MAX_INPUT} bytes at a time")
    if "\x00" in text:
        raise InvalidInput("text: must not contain NUL bytes")
    if not text and not enter:
        return  # nothing to type
    terminal = terminal_of(task)
    deadline = time.monotonic() + INPUT_OFF_PATIENCE
    try:
        while True:
            if task.slot_released is not None:
                retake(task, terminal, store)
            try:
                terminal.send(text, enter)
                return
            except InputOff:
                # Its node is giving its slot back (input goes off first): once the
                # store says so, take one again; if it does not, input comes back.
                if store is None or time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)
            task = store.get(task.id)
            terminal = terminal_of(task)
    except TerminalError as exc:
        raise InvalidTransition(f"task {task.id[:8]}: {exc}") from None


def retake(task: Task, terminal: Terminal, store: Store | None) -> None:
    """Take a slot again for a run that gave its back, then let input reach it.

    Raises:
        InvalidTransition: no slot is free for it now (nothing changed), or no store.
        TerminalError: its terminal is gone.
    """
    short = task.id[:8]
    if store is None or task.current_attempt is None:
        raise InvalidTransition(f"task {short} gave its slot back while it waited for input")
    full = store.retake_slot(task.id, task.current_attempt)
    if full is not None:
        raise NoSlot(
            f"task {short} gave its slot back while it waited for input and cannot take "
            f"one again now ({full}); nothing was typed",
            full,
        )
    terminal.allow_input(True)
