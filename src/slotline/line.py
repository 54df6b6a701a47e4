"""The line as people read it: NEXT UP (the task expected to start first) and the waiting
reasons that hold the whole line rather than one task."""

from __future__ import annotations

from collections.abc import Iterable

from slotline.models import Task

# How many queued tasks a status shows unless its caller asks for the whole line (`all`):
# the head of the line, read through the queue-order index, so a status costs the same
# in a line of ten or of 100,000 (`queued_total` says how many there are in all).
STATUS_HEAD = 20


def next_up(queued: Iterable[Task]) -> Task | None:
    """NEXT UP: the task of `queued` expected to start first, the earliest estimated
    start (ties by position). A task without an estimate is a candidate only when what
    keeps it is the whole line's (`waits_with_the_line`), after those with one, by
    position; None when no task is expected to start. A task that waits for its own
    start time (`--in`, `--at`) is never NEXT UP: it waits for a time, not for its turn."""
    found = [
        t for t in queued if (t.eta_start is not None or waits_with_the_line(t)) and not _delayed(t)
    ]
    inf = float("inf")
    return min(
        found,
        key=lambda t: (inf if t.eta_start is None else t.eta_start, t.position or inf),
        default=None,
    )


def _delayed(task: Task) -> bool:
    return task.waiting_reason is not None and task.waiting_reason.kind == "start_time"


def waits_with_the_line(task: Task) -> bool:
    """Whether a task in line would start now, or waits only for what holds every task
    (a slot, a pause, the resource guard, a node): nothing of its own (start time, hold,
    dependency, limit, rate, budget, back-off) keeps it."""
    reason = task.waiting_reason
    return reason is None or reason.kind in LINE_WIDE


# Waiting reasons that hold the whole line, not one task (`unserved` holds one function's
# tasks only: no live node serves it).
LINE_WIDE = frozenset({"slots", "paused", "guard", "no_node"})


def unserved_reason(name: str) -> str:
    """Why a function task does not start: no live node serves its name (the text of a
    waiting reason of kind `unserved`)."""
    return (
        f"no live node serves function {name!r}; start one with `slotline serve --app MODULE:APP`"
    )


# How a waiting reason of kind `slots` begins when max_concurrent is 0 (nothing starts).
NO_SLOTS = "max_concurrent is 0"
