"""The claim's common case: a global limit, priorities and boosts, nothing else configured.

A node's claim decides on a snapshot of the line with `policy.plan`, which knows every
rule (per-key limits, exempt agent types, aging, fairness, rates, budgets, back-off,
"start now"). When none of them is in force, the plan only fills the free slots with the
first tasks in line that the node runs and that may start yet; this module does that
without the snapshot of every running task and without the plan's walk: it counts the
slots taken and reads the head of the line, building a task only for what it starts
(which the claim then starts as it starts the plan's). `tests/contract/test_head_claim.py`
holds it to the plan: on random lines and settings, both start the same tasks and wake
at the same time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from slotline.models import Kind, Task
from slotline.pacing.backoff import Throttle
from slotline.scheduler import policy
from slotline.store.queries import FIRST_PAGE, Tx
from slotline.store.rows import task_from_row
from slotline.store.settings import Settings
from slotline.store.statements import Read
from slotline.store.tasks import count_of


@dataclass(frozen=True, slots=True)
class Decided:
    """What a claim starts (as `policy.Plan` says it), with what it found running."""

    # What to start, in line order.
    start: list[policy.Start[Task]]
    # When to look again if nothing else happens (`Plan.next_wake`).
    next_wake: float | None
    # How many running tasks hold a slot, before these starts.
    running: int
    # Those tasks, when a rule counts them by more than their number (the plan's).
    holding: Sequence[Task] | None = None
    # The "start now" tasks waiting (the plan's).
    start_now: Sequence[Task] = ()

    def closed_by(self, limits: policy.Limits, started: Sequence[Task]) -> bool:
        """Whether, with `started` running too, no node could start a task under `limits`
        (the store's own, not a node's guard): every slot is taken and no "start now"
        task waits (`policy.pool_full`)."""
        ids = {task.id for task in started}
        if any(task.id not in ids for task in self.start_now):
            return False
        if self.holding is None:  # every running task is in the pool: none is exempt
            return not limits.exempt_agents and self.running + len(started) >= limits.max_concurrent
        return policy.pool_full(limits, [*self.holding, *started])


def may_be_common(settings: Settings, throttles: Sequence[Throttle]) -> bool:
    """Whether a claim under `settings` may take the common case (what its guard and its
    line, read later, may still rule out): read before what the claim reads ahead."""
    limits = settings.limits
    return not (
        limits.per_key
        or limits.exempt_agents
        or settings["paused"]
        or settings["aging_interval"]
        or settings.rates
        or settings.budgets
        or settings["fairness"]
        or throttles
    )


def reads() -> list[Read]:
    """What the common case reads of the line, to read ahead (`Tx.prefetch`)."""
    return [
        Read("tasks_start_now", by_index=True),
        Read("count_holding_slots", by_index=True),
        Read("tasks_queued_in_order", {"limit": FIRST_PAGE, "offset": 0}, by_index=True),
    ]


def decide(
    tx: Tx,
    max_concurrent: int,
    now: float,
    runnable: tuple[frozenset[str], frozenset[str] | None],
    node_free: int | None,
) -> Decided | None:
    """The first tasks in line that fit `max_concurrent`, as `policy.plan` would start
    them when nothing else is in force (`may_be_common`, and no hold of the node's guard).
    None when the plan must decide after all: a "start now" task waits, or the node's
    own slots (`node_free`) are fewer than the store's."""
    if tx.rows("tasks_start_now"):
        return None
    running = count_of(tx, "count_holding_slots")
    free = max_concurrent - running
    if free <= 0:
        return Decided([], None, running)
    if node_free is not None and node_free < free:
        return None  # the node's slots cut the plan short: its wake is the plan's
    kinds, functions = runnable
    picked: list[dict[str, Any]] = []
    wake: float | None = None
    # The first page as read ahead, on a store with a server; else only what may fill
    # the free slots (more pages when the node does not run some of it).
    page = FIRST_PAGE if tx.reads_ahead else free
    for row in tx.iter_rows("tasks_queued_in_order", page=page):
        kind, name = row["kind"], row["callable"]
        if kind == Kind.CALLABLE and functions is not None:
            if name not in functions:
                continue
        elif kind not in kinds:
            continue
        not_before = row["not_before"]
        if not_before is not None and not_before > now:
            wake = not_before if wake is None else min(wake, not_before)
            continue
        picked.append(row)
        if len(picked) == free:
            break
    return Decided([policy.Start(task_from_row(row), False) for row in picked], wake, running)
