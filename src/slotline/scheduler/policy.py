"""The dispatch policy: a pure function from a snapshot of the queue to decisions.

Nothing here reads a clock or a database; the store calls `plan` inside the claim
transaction and applies what it returns.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from slotline.clock import iso
from slotline.config import settings as table
from slotline.limits import Limit
from slotline.line import NO_SLOTS
from slotline.models import Status, WaitingReason
from slotline.pacing.budgets import BudgetBook
from slotline.pacing.rates import RateBook
from slotline.scheduler.fairness import Fairness, fair_line


class Placeable(Protocol):
    """What the policy reads of a task: a stored `Task`, or the lighter entry the ETA
    simulation builds from a few columns."""

    @property
    def id(self) -> str: ...
    @property
    def agent(self) -> str | None: ...
    @property
    def priority(self) -> int: ...
    @property
    def boosted(self) -> bool: ...
    @property
    def rank(self) -> str: ...
    @property
    def status(self) -> Status: ...
    @property
    def queued_at(self) -> float | None: ...
    @property
    def not_before(self) -> float | None: ...
    def key_value(self, key: str) -> str | None: ...


T = TypeVar("T", bound=Placeable)


@dataclass(frozen=True, slots=True)
class Limits:
    """Every cap on running tasks."""

    max_concurrent: int = table.default("max_concurrent")
    per_key: tuple[Limit, ...] = ()
    # Agent types whose tasks neither count against nor wait for `max_concurrent`.
    exempt_agents: frozenset[str] = frozenset()

    def for_value(self, key: str, value: str) -> int | None:
        """The cap for tasks whose `key` is `value`: a named limit beats a generic one."""
        generic: int | None = None
        for limit in self.per_key:
            if limit.key != key:
                continue
            if limit.value == value:
                return limit.max
            if limit.value is None:
                generic = limit.max
        return generic

    def in_pool(self, task: Placeable) -> bool:
        return task.agent is None or task.agent not in self.exempt_agents


@dataclass(frozen=True, slots=True)
class Snapshot(Generic[T]):
    """What the policy sees: running tasks, the queue, the limits, the time.

    `queued` holds the queued tasks in store order (boosted, priority, rank); the policy
    reads only as far as it needs to, and re-sorts only when aging is on.
    """

    running: Sequence[T]
    queued: Iterable[T]
    limits: Limits
    now: float
    start_now: Sequence[T] = ()
    paused: bool = False
    aging_interval: float | None = None
    # Rate limits and the starts in their windows (pacing/rates.py); the plan counts
    # its own starts in a copy, so the snapshot is left as it was.
    rates: RateBook | None = None
    # Agent types backing off from their provider: no start before the instant given
    # (pacing/backoff.py; their lowered caps are in `limits`).
    holds: Mapping[str, float] = field(default_factory=dict)
    # Fair dispatch within each band of the line (see `order`), and each value's pass
    # (scheduler/fairness.py); None: rank order.
    fairness: Fairness | None = None
    passes: Mapping[str, float] = field(default_factory=dict)
    # Budgets and the spend of finished runs in their windows (pacing/budgets.py):
    # a task whose budget is reached waits until enough spend ages out.
    budgets: BudgetBook | None = None


@dataclass(frozen=True, slots=True)
class Start(Generic[T]):
    task: T
    over_limit: bool
    # With fairness on: the turn the task started at (what its value's pass moves past).
    turn: float | None = None

    @property
    def task_id(self) -> str:
        return self.task.id


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """What to start now, and when to look again if nothing else happens."""

    start: list[Start[T]] = field(default_factory=list)
    next_wake: float | None = None


def effective_priority(task: Placeable, now: float, aging_interval: float | None) -> int:
    """Priority raised one level per `aging_interval` waited (never above urgent)."""
    if not aging_interval or task.queued_at is None:
        return int(task.priority)
    levels = int(max(0.0, now - task.queued_at) // aging_interval)
    return max(0, int(task.priority) - levels)


# The order of the line, the one rule: boosted first, then priority, then rank. Python
# sorts by `queue_key`; the store's queries say `ORDER BY {line_order}`, filled in from
# LINE_ORDER_SQL (by stored priority: with aging on, `order` re-sorts what they read),
# and the tasks_line index (migration 0001) serves it. With fairness on, each band
# (boosted, effective priority) is then put in fair order instead of rank order
# (scheduler/fairness.py): `order` and `plan` apply it, bands stay in their order.
LINE_ORDER_SQL = "boosted DESC, priority, rank"


def queue_key(task: Placeable, now: float, aging_interval: float | None) -> tuple[int, int, str]:
    """Sort key of the queue (LINE_ORDER_SQL, with the effective priority)."""
    return (0 if task.boosted else 1, effective_priority(task, now, aging_interval), task.rank)


def band_key(task: Placeable, now: float, aging_interval: float | None) -> tuple[int, int]:
    """The band of the line a task is in: boosted, effective priority."""
    return (0 if task.boosted else 1, effective_priority(task, now, aging_interval))


def order(
    tasks: Iterable[T],
    now: float,
    aging_interval: float | None = None,
    fairness: Fairness | None = None,
    passes: Mapping[str, float] | None = None,
) -> list[T]:
    """Queued tasks in dispatch order; position N is index N-1. With `fairness`, each
    band is in fair order given each value's pass."""
    queued = [t for t in tasks if t.status is Status.QUEUED]
    ordered = sorted(queued, key=lambda t: queue_key(t, now, aging_interval))
    if fairness is None:
        return ordered
    bands = lambda t: band_key(t, now, aging_interval)  # noqa: E731
    return list(fair_line(ordered, fairness, passes or {}, bands))


class _Usage:
    """Running counts per limit, updated as the plan admits tasks."""

    def __init__(self, limits: Limits, running: Iterable[Placeable]) -> None:
        self.limits = limits
        self.global_count = 0
        self.by_key: Counter[tuple[str, str]] = Counter()
        self.keys = sorted({limit.key for limit in limits.per_key})
        for task in running:
            self.add(task)

    def add(self, task: Placeable) -> None:
        if self.limits.in_pool(task):
            self.global_count += 1
        for key in self.keys:
            value = task.key_value(key)
            if value is not None:
                self.by_key[key, value] += 1

    def fits(self, task: Placeable) -> bool:
        if self.limits.in_pool(task) and self.global_count >= self.limits.max_concurrent:
            return False
        for key in self.keys:
            value = task.key_value(key)
            if value is None:
                continue
            cap = self.limits.for_value(key, value)
            if cap is not None and self.by_key[key, value] >= cap:
                return False
        return True

    def full_for(self, task: Placeable) -> WaitingReason:
        """Which cap keeps `task` out (`fits` said one does), in words: a full per-key
        limit before a full pool, as the one that still holds it when a slot frees."""
        cap = self.limits.max_concurrent
        pooled = self.limits.in_pool(task) and self.global_count >= cap
        if pooled and cap == 0:
            return WaitingReason("slots", f"{NO_SLOTS}: no task starts until it is raised")
        for key in self.keys:
            value = task.key_value(key)
            limit = None if value is None else self.limits.for_value(key, value)
            if value is not None and limit is not None and self.by_key[key, value] >= limit:
                count = self.by_key[key, value]
                return WaitingReason("limit", f"{key}={value}: {count}/{limit} running")
        if pooled and self.global_count > cap:
            text = f"{self.global_count}/{cap} running: over the limit (a task was started now)"
            return WaitingReason("slots", text)
        return WaitingReason("slots", _taken(cap))

    def closed(self) -> bool:
        """Every slot of `max_concurrent` is taken and no queued task may go past it (no
        agent type is exempt): only a "start now" task could start."""
        return not self.limits.exempt_agents and self.global_count >= self.limits.max_concurrent


def _taken(cap: int) -> str:
    """Every slot of a pool of `cap` is taken, in words."""
    return "the 1 slot is taken" if cap == 1 else f"all {cap} slots are taken"


def kept_out(limits: Limits, running: Iterable[Placeable], task: Placeable) -> str | None:
    """Which limit would keep `task` from starting beside `running`, in words (as a
    waiting reason says it); None when it fits every limit."""
    usage = _Usage(limits, running)
    return None if usage.fits(task) else usage.full_for(task).text


def pool_full(limits: Limits, running: Iterable[Placeable]) -> bool:
    """Whether `running` closes the pool (`_Usage.closed`)."""
    return _Usage(limits, running).closed()


def plan(
    snapshot: Snapshot[T],
    runnable: Callable[[T], bool] | None = None,
    why: dict[str, WaitingReason] | None = None,
) -> Plan[T]:
    """Decide which queued tasks start now.

    Every free slot is filled in one pass, in queue order; a task whose per-key limit is
    full is skipped, not waited on. A task marked `start_now` starts whatever the limits
    say, and its attempt is flagged over-limit if it pushed a count past a cap.

    A task whose rate limit has no room, or whose agent type is backing off, waits in
    its place (skipped, like a full per-key limit), and `next_wake` says when it may
    start; so does a task whose budget is reached. Start-now ignores all three, but its
    start counts against the rates.

    Given `why`, the walk goes on to the end of the line and records there, for every
    queued task it does not start, the reason (the plan is the same; a claim passes
    none, and stops reading where the slots are full).
    """
    now = snapshot.now
    can_run = runnable or (lambda _task: True)
    usage = _Usage(snapshot.limits, snapshot.running)
    book = snapshot.rates.copy() if snapshot.rates else None
    starts: list[Start[T]] = []
    wake: list[float] = []
    for task in snapshot.start_now:
        if can_run(task):
            starts.append(Start(task, over_limit=not usage.fits(task)))
            usage.add(task)
            if book is not None:
                book.record(task, now)
    started = {s.task_id for s in starts}
    if snapshot.paused:
        if why is not None:
            paused = WaitingReason("paused", "the queue is paused; `slotline resume` starts it")
            why.update(
                (t.id, paused) for t in snapshot.queued if t.id not in started and can_run(t)
            )
        return Plan(start=starts)
    line: Iterable[T] = snapshot.queued
    if snapshot.aging_interval:
        line = order(line, now, snapshot.aging_interval)
    turns: dict[str, float] = {}
    if snapshot.fairness is not None:
        # Read one band at a time: the claim stops reading where the slots are full.
        aging = snapshot.aging_interval
        line = fair_line(
            line, snapshot.fairness, snapshot.passes, lambda t: band_key(t, now, aging), turns
        )
    full = False
    for task in line:
        if usage.closed():
            if why is None:
                break  # not even reading the next task (a claim reads the line in pages)
            full = True  # the rest is read only for the reasons
        if task.id in started or not can_run(task):
            continue
        found = _obstacle(snapshot, usage, book, task)
        if found is not None:
            kind, until = found
            if until is not None and not full:
                wake.append(until)
            if why is not None:
                why[task.id] = _reason(snapshot, usage, task, kind, until)
            continue
        starts.append(Start(task, over_limit=False, turn=turns.get(task.id)))
        usage.add(task)
        if book is not None:
            book.record(task, now)
        if why is None and usage.closed():
            break  # not even reading the next task (a claim reads the line in pages)
    return Plan(start=starts, next_wake=min(wake) if wake else None)


def _obstacle(
    snapshot: Snapshot[T], usage: _Usage, book: RateBook | None, task: T
) -> tuple[str, float | None] | None:
    """What keeps `task` from starting now, checked in this order: its start time, its
    agent type's back-off, a reached budget, a full limit (`full`), a rate; and until
    when, if that is known. None: it may start."""
    now = snapshot.now
    if task.not_before is not None and task.not_before > now:
        return "start_time", task.not_before
    holds = snapshot.holds
    held = holds.get(task.agent) if task.agent is not None and holds else None
    if held is not None and held > now:
        return "backoff", held
    spent = snapshot.budgets.held_until(task, now) if snapshot.budgets else None
    if spent is not None:
        return "budget", spent
    if not usage.fits(task):
        return "full", None
    allowed = book.next_allowed(task, now) if book is not None else None
    if allowed is not None:
        return "rate", allowed
    return None


def _reason(
    snapshot: Snapshot[T], usage: _Usage, task: T, kind: str, until: float | None
) -> WaitingReason:
    """The reason `_obstacle` found, in words (a time to the second, in UTC: surfaces
    show `until` in their own form beside it)."""
    at = "" if until is None else f" until {_when(until)}"
    if kind == "full":
        return usage.full_for(task)
    if kind == "start_time":
        return WaitingReason(kind, f"not before {_when(until)}", until)
    if kind == "backoff":
        return WaitingReason(kind, f"agent {task.agent} is backing off its provider{at}", until)
    if kind == "budget":
        names = snapshot.budgets.reached_names(task, snapshot.now) if snapshot.budgets else []
        which = f"budget {', '.join(names)}" if names else "a budget it counts against"
        return WaitingReason(kind, f"{which} reached{at}", until)
    return WaitingReason(kind, f"a rate limit has no room{at}", until)


def _when(at: float | None) -> str:
    """An instant as people read it: `2026-11-28 14:05:09Z` (a second rounded up, so a
    task never reads as free before it is)."""
    return "?" if at is None else str(iso(math.ceil(at))).replace("T", " ")
