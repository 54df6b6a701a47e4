"""Estimated start and finish times: the line simulated forward under the real policy.

A pure function of a snapshot, like `policy.plan`, which it calls at every simulated
instant, so that the estimate follows the same rules as dispatch (limits, per-key caps,
agent types outside the pool, start-now, boosts, `not_before`, the resource guard's
current hold or limit). Dependencies are met when the tasks they name end in the
simulation; held tasks, tasks waiting on them, and everything queued while the queue is
paused (or a guard holds starts with nothing running) get no estimate.

Only the tasks that could possibly start at an instant are handed to `plan`: tasks with
the same limit values (a "class") are interchangeable for the limits, so at most as many
of each class as there are slots can start at once, and only those need be looked at.
That keeps one simulation linear in the length of the line. When only the pool's limit
decides (`_plain`), there is one class, and a step starts its candidates without asking
`plan`, which would start the same.

Run times are read as log-normal: a queued task is expected to take the mean of its
agent type's distribution (what a sum of run times grows by), a running one the mean of
what is left of a run that has already lasted as long as it has. Work that is expected
to join the line ahead of a task (submits at a higher priority, at the rates recently
seen per agent type) is played in as it would arrive, so that an estimate made now
accounts for it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass

from slotline.models import Status, WaitingReason
from slotline.pacing.rates import RateBook
from slotline.scheduler import policy, waiting
from slotline.scheduler.durations import RunTimes
from slotline.scheduler.lineup import Entry, Line
from slotline.scheduler.pending import Pending
from slotline.scheduler.unknown_ends import UnknownEnds

# A running task past its estimate is expected to need at least this share of it more.
REMAINING_FLOOR = 0.1
MIN_REMAINING = 0.05
# Work expected to join the line is played in for at most this long ahead, and at most
# this many tasks of it per simulation, so that an estimate stays cheap and does not
# rest on a forecast far beyond what was seen.
MAX_FORECAST = 300.0
MAX_ARRIVALS = 1_000


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a task is expected to start and finish (epoch seconds), and on what basis."""

    start: float | None
    finish: float | None
    basis: str | None
    # Why the task does not start now, as dispatch would decide it (None: it would).
    waiting: WaitingReason | None = None
    # Why the start or finish is unknown (no run of its agent type has finished…).
    unavailable: str | None = None
    # A running task's expected end (its start plus its expected run time): past it,
    # the run is overdue (`eta_overdue`), whatever its `finish` now says.
    due: float | None = None


UNKNOWN = Estimate(None, None, None)


# Where a task sorts in the line: queue_key, or with fairness (band, virtual time, rank).
def simulate(line: Line, run_times: RunTimes) -> dict[str, Estimate]:
    """Estimates for every task of `line`: start and finish for queued and waiting tasks,
    finish for running ones; `UNKNOWN` where nothing can be said (held, paused,
    admission held, or waiting on a task that has no estimate)."""
    now = line.now
    estimates: dict[str, Estimate] = {}
    tiebreak = itertools.count()
    ends: list[tuple[float, int, Entry]] = []  # a heap of (finish, tiebreak, task)
    unknown_end = UnknownEnds()
    for task in line.running:
        found = run_times.known(task)
        took = run_times.default if isinstance(found, str) else found.duration
        started = task.started_at if task.started_at is not None else now
        left = max(took.remaining(now - started), took.mean * REMAINING_FLOOR, MIN_REMAINING)
        if isinstance(found, str):
            estimates[task.id] = Estimate(started, None, None, unavailable=found)
            unknown_end.ends[task.id] = found
        else:
            expected = started + took.mean
            estimates[task.id] = Estimate(started, now + left, found.basis, due=expected)
        heapq.heappush(ends, (now + left + run_times.gap, next(tiebreak), task))
    unknown = [*line.held, *line.waiting, *line.queued]
    limits, opens, guarded = line.limits, now, ""
    if line.admission is not None:
        limits, opens, guarded = line.admission.apply(line, ends[0][0] if ends else math.inf)
    why = waiting.reasons(line, limits)
    if line.paused:
        estimates.update(dict.fromkeys((t.id for t in unknown), UNKNOWN))
        return _with_reasons(estimates, why)
    estimates.update(dict.fromkeys((t.id for t in line.held), UNKNOWN))
    book = line.rates.copy() if line.rates else None
    rated = [*(book.keys if book is not None else ()), *(["agent"] if line.holds else [])]
    rated += line.budgets.keys if line.budgets else []
    pending = Pending(limits, now, line.aging_interval, rated, line.fair)
    timers: list[tuple[float, int, Entry]] = []  # tasks whose not_before is ahead
    start_now = [t for t in line.queued if t.start_now and not line.unserved(t)]
    for task in line.queued:
        if task.start_now or line.unserved(task):
            continue
        if task.not_before is not None and task.not_before > now:
            heapq.heappush(timers, (task.not_before, next(tiebreak), task))
        else:
            pending.add(task)
    # Waiting tasks: which of their dependencies are still to end, in the simulation.
    known = {t.id for t in (*line.running, *line.queued, *line.waiting, *line.held)}
    unmet: dict[str, set[str]] = {}
    dependents: dict[str, list[Entry]] = {}

    def ready(task: Entry) -> None:
        if line.unserved(task):
            return
        # A task bumped while it waited starts as soon as it is ready, over the limit,
        # as the claim starts it (the plan starts start-now tasks from their own list).
        if task.start_now:
            start_now.append(task)
        else:
            pending.add(task)

    for task in line.waiting:
        needs = {d for d in task.depends_on if d in known}
        unmet[task.id] = needs
        for dep in needs:
            dependents.setdefault(dep, []).append(task)
        if not needs:
            ready(task)
    # Tasks of the line still to start; forecast work arrives only while some are left.
    left = len(line.queued) + len(_startable(line, known))
    arrivals = _Arrivals(line, left)
    ahead: dict[str | None, int] = {}  # forecast tasks started so far, per agent type
    running = {t.id: t for t in line.running}
    clock = now
    plain = _plain(line, limits, book)
    # Every turn but the timers' starts or ends a task; what is left unknown after this
    # many (a rule the simulation does not foresee) is reported UNKNOWN, never a hang.
    turns = 4 * (len(unknown) + len(line.running) + MAX_ARRIVALS) + 10_000
    while True:
        in_pool = sum(1 for t in running.values() if limits.in_pool(t))
        free = max(0, limits.max_concurrent - in_pool) if clock >= opens else 0
        # While a guard holds, only start-now tasks start.
        candidates = pending.candidates(free) if clock >= opens else []
        if plain and not start_now:
            chosen, room = candidates, None
        else:
            chosen, room = _plan(running, candidates, start_now, clock, limits, book, line)
        start_now = []
        for task in chosen:
            if book is not None:
                book.record(task, clock)
            if not task.start_now:  # a start-now task is not among the pending
                pending.started(task)
            found = run_times.known(task)
            took = run_times.default if isinstance(found, str) else found.duration
            end = clock + took.mean + run_times.gap
            if arrivals.forecast(task):
                ahead[task.agent] = ahead.get(task.agent, 0) + 1
            else:
                after = unknown_end.before(task, clock, limits)
                if after is not None:
                    estimates[task.id] = Estimate(None, None, None, unavailable=after)
                    unknown_end.ends[task.id] = after  # its end is not known either
                elif isinstance(found, str):
                    estimates[task.id] = Estimate(clock, None, None, unavailable=found)
                else:
                    basis = found.basis
                    if ahead.get(task.agent):
                        basis += f"; after {ahead[task.agent]} expected arrivals ahead"
                    if not task.start_now:
                        basis += guarded
                    estimates[task.id] = Estimate(clock, clock + took.mean, basis)
                arrivals.left -= 1
            if isinstance(found, str) and not arrivals.forecast(task):
                unknown_end.ends.setdefault(task.id, found)  # (forecast work is a guess)
            running[task.id] = task
            if estimates.get(task.id, UNKNOWN).start is None and task.id in unknown_end.ends:
                unknown_end.started(task, clock, running.values(), limits)
            heapq.heappush(ends, (end, next(tiebreak), task))
        due = arrivals.next_at()
        # When a rate or a back-off hold lets a task that waits on it start.
        room = room if not pending.empty() else None
        if not ends and not timers and due is None and room is None:
            break
        turns -= 1
        if turns < 0:  # a guard: each turn starts or ends something, or a timer passes
            break
        clock = min(
            ends[0][0] if ends else math.inf,
            timers[0][0] if timers else math.inf,
            due or math.inf,
            room or math.inf,
        )
        while timers and timers[0][0] <= clock:
            pending.add(heapq.heappop(timers)[2]._replace(not_before=None))
        for task in arrivals.due(clock):
            pending.add(task)
        while ends and ends[0][0] <= clock:
            done = heapq.heappop(ends)[2]
            unknown_end.ended(done, clock, running.values(), limits)
            running.pop(done.id, None)
            for waiter in dependents.pop(done.id, ()):
                needs = unmet[waiter.id]
                needs.discard(done.id)
                unknown_end.waited(done, waiter)
                if not needs:
                    ready(waiter)
        if not running and pending.empty() and not timers and arrivals.next_at() is None:
            break
    estimates.update({t.id: UNKNOWN for t in unknown if t.id not in estimates})
    return _with_reasons(estimates, why)


def _plain(line: Line, limits: policy.Limits, book: RateBook | None) -> bool:
    """Whether only the pool's limit decides (no per-key limit, exempt agent type, rate,
    back-off hold or budget): then every task of the line is of one class, and the plan
    would start the candidates as they come, as many as there are free slots (`Pending`
    gives no more), with no wake of its own; so it is not asked, but where a start-now
    task waits (tests/unit/test_eta.py holds both ways to the same estimates)."""
    rules = limits.per_key or limits.exempt_agents or book is not None
    return not (rules or line.holds or line.budgets)


def _plan(
    running: Mapping[str, Entry],
    candidates: list[Entry],
    start_now: list[Entry],
    clock: float,
    limits: policy.Limits,
    book: RateBook | None,
    line: Line,
) -> tuple[list[Entry], float | None]:
    """What the plan starts at `clock` of the candidates and start-now tasks, and when it
    would look again (a rate's or a hold's end)."""
    snapshot = policy.Snapshot(
        running=list(running.values()),
        queued=candidates,
        limits=limits,
        now=clock,
        start_now=start_now,
        rates=book,
        holds=line.holds,
        budgets=line.budgets,
    )
    by_id = {t.id: t for t in (*candidates, *start_now)}
    decided = policy.plan(snapshot)
    return [by_id[start.task_id] for start in decided.start], decided.next_wake


def _with_reasons(
    estimates: dict[str, Estimate], why: Mapping[str, WaitingReason]
) -> dict[str, Estimate]:
    for task_id, reason in why.items():
        # (as `replace` would, a tenth of its time: it runs for every task in line)
        e = estimates.get(task_id, UNKNOWN)
        estimates[task_id] = Estimate(
            start=e.start,
            finish=e.finish,
            basis=e.basis,
            waiting=reason,
            unavailable=e.unavailable,
            due=e.due,
        )
    return estimates


def _startable(line: Line, known: set[str]) -> set[str]:
    """The waiting tasks whose dependencies can all end in the simulation (none of them
    held, nor waiting on a held one)."""
    can = {t.id for t in (*line.running, *line.queued)}
    waiting = {t.id: t for t in line.waiting}
    grew = True
    while grew:
        grew = False
        for task_id, task in list(waiting.items()):
            if all(d in can or d not in known for d in task.depends_on):
                can.add(task_id)
                del waiting[task_id]
                grew = True
    return {t.id for t in line.waiting} - set(waiting)


# Forecast tasks sort after every real rank, in the order they arrive.
_FORECAST_RANK = "\U0010ffff"


class _Arrivals:
    """The forecast work of a line, as tasks that arrive at a steady rate per stream
    until `line.forecast` seconds have passed or no task of the line is left to start."""

    def __init__(self, line: Line, left: int) -> None:
        self.left = left
        self.until = line.now + min(line.forecast, MAX_FORECAST)
        self.budget = MAX_ARRIVALS
        self.count = itertools.count()
        self.ids: set[str] = set()
        # Each stream's first task arrives half an interval in: the count of arrivals by
        # any instant is then the rate times the time elapsed, rounded.
        self.heap = [
            (line.now + 0.5 / a.rate, i, a) for i, a in enumerate(line.arrivals) if a.rate > 0
        ]
        heapq.heapify(self.heap)

    def next_at(self) -> float | None:
        if self.left <= 0 or self.budget <= 0 or not self.heap or self.heap[0][0] > self.until:
            return None
        return self.heap[0][0]

    def due(self, clock: float) -> list[Entry]:
        found = []
        while (at := self.next_at()) is not None and at <= clock:
            _at, i, stream = heapq.heappop(self.heap)
            n = next(self.count)
            task = Entry(
                id=f"~forecast-{n}", agent=stream.agent, workspace=None, user=None, labels={},
                priority=stream.priority, boosted=False, start_now=False,
                rank=f"{_FORECAST_RANK}{n:09d}", status=Status.QUEUED, depends_on=(),
                not_before=None, queued_at=at, started_at=None, expected_duration=None,
            )  # fmt: skip
            self.ids.add(task.id)
            self.budget -= 1
            found.append(task)
            heapq.heappush(self.heap, (at + 1 / stream.rate, i, stream))
        return found

    def forecast(self, task: Entry) -> bool:
        """Whether `task` is forecast work (which gets no estimate)."""
        return task.id in self.ids
