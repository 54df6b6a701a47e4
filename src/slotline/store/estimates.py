"""ETAs as the store reads them: the line in one query, recent run times, the simulation.

Run inside the caller's transaction: `line_estimates` reads only the columns the
simulation needs (one query for the whole line), and `add_samples` keeps the recent run
times of each agent type (and of all tasks) in `run_times`, so estimates survive a restart
(`windows` adds the runs a finish or a node's claims ended).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slotline.models import Priority, Status, Task, copy_task
from slotline.pacing import backoff
from slotline.scheduler import durations, eta, lineup, policy
from slotline.scheduler.fairness import Fairness, virtual_times
from slotline.store import backoff as provider
from slotline.store import budgets, rates, serving
from slotline.store import fairness as fair
from slotline.store.queries import Tx
from slotline.store.settings import LEASE_SECONDS, Settings, read_settings

# How many recent runs the statistic looks at, per agent type and over all tasks. A
# longer window varies less but lags behind a change of run times (a busier machine):
# 100 did worse than 50 on bench/eta.py.
WINDOW = 50
# Estimates are made as of the store's last change, so that reading an unchanged line
# twice gives the same answer; after this long without a change, as of the current
# minute instead (an overdue run's end moves on).
STALE = 60.0
ALL = ("all", "")
GAP = ("dispatch", "")
# The forecast of work joining the line rests on the arrivals of the last this many
# seconds (among the last SCAN events); over at least MIN_SPAN, so that the first burst
# on a new store is not read as a rate that lasts.
ARRIVAL_WINDOW = 300.0
SCAN = 5_000
MIN_SPAN = 10.0


_STATUSES = {s.value: s for s in Status}
# The tasks that have an estimate: those running or in line.
IN_LINE = frozenset({Status.RUNNING, Status.QUEUED, Status.WAITING, Status.HELD})

log = logging.getLogger("slotline.store")


def line_task(row: Mapping[str, Any]) -> lineup.Entry:
    """The fields of a task the policy and the simulation read, from a row of `eta_line`."""
    labels = row["labels"]
    depends = row["depends_on"]
    return lineup.Entry(
        row["id"],
        row["agent"],
        row["workspace"],
        row["owner"],
        json.loads(labels) if labels != "{}" else {},
        row["priority"],
        bool(row["boosted"]),
        bool(row["start_now"]),
        row["rank"],
        _STATUSES[row["status"]],
        tuple(json.loads(depends)) if depends != "[]" else (),
        row["not_before"],
        row["queued_at"],
        row["started_at"],
        row["expected_duration"],
        row.get("parent_id"),
        row.get("repo"),
        row.get("kind") or "command",
        row.get("callable"),
    )


def run_times(tx: Tx) -> durations.RunTimes:
    """The recent run times per agent type and over all tasks, fitted from their windows
    of samples (so that a change of statistic applies to windows stored before it)."""
    per_agent: dict[str, durations.Duration] = {}
    overall = None
    gap = 0.0
    for row in tx.rows("run_times_all"):
        if (row["scope"], row["name"]) == GAP:
            gap = float(row["estimate"])
            continue
        samples = json.loads(row["samples"])
        found = durations.fit(samples) if samples else durations.Duration(float(row["estimate"]), 0)
        if (row["scope"], row["name"]) == ALL:
            overall = found
        else:
            per_agent[row["name"]] = found
    return durations.RunTimes(per_agent, overall, gap=gap)


def _last_change(tx: Tx, now: float) -> tuple[int, float]:
    """The seq of the store's last event, and the instant the line is simulated from:
    that event's time, or the current minute when it is older than STALE."""
    row = tx.one("events_last")
    seq, last = (0, None) if row is None else (int(row["seq"]), float(row["at"]))
    if last is not None and now - STALE <= last <= now:
        return seq, last
    return seq, now - now % STALE


def as_of(tx: Tx, now: float) -> float:
    return _last_change(tx, now)[1]


# The last estimates made per store and read (the whole line, or the head of N), by (seq
# of the last event, instant simulated from): every change appends an event, so an
# unchanged key is an unchanged line, and a reader polling one task (wait_for_task,
# `submit --wait`) or the status does not simulate again.
_CACHE: dict[tuple[str, int | None], tuple[tuple[int, float], Mapping[str, eta.Estimate]]] = {}


def line_estimates(tx: Tx, now: float, store: str | None = None) -> Mapping[str, eta.Estimate]:
    """Estimates of every running, queued, waiting and held task, by id, simulated from
    the store's last change: a function of the store's state, the same on every read
    (kept per `store` URL until the next change)."""
    return _estimates(tx, now, store, None)


def head_estimates(
    tx: Tx, now: float, head: int, store: str | None = None
) -> Mapping[str, eta.Estimate]:
    """Estimates of the running tasks and the first `head` queued ones, simulated without
    the tasks behind them and without the waiting and held ones, but otherwise as the
    whole line is (`line_estimates`): from the same instant, under the same guard, with
    the same work expected to arrive.

    Simulating a whole line costs time in proportion to it (seconds at 100,000 queued),
    and a task's start depends mostly on what is ahead of it. It can be later than this
    says when a per-key limit lets a task from behind start first and take a slot, or
    when a waiting task of a higher priority joins the line ahead.
    """
    return _estimates(tx, now, store, head)


@dataclass(frozen=True, slots=True)
class NoEstimates(Mapping[str, eta.Estimate]):
    """The estimates of a line that could not be simulated: none, and `why`, which every
    task in line shows as `eta_unavailable`."""

    why: str

    def __getitem__(self, task_id: str) -> eta.Estimate:
        raise KeyError(task_id)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _estimates(
    tx: Tx, now: float, store: str | None, head: int | None
) -> Mapping[str, eta.Estimate]:
    key = _last_change(tx, now)
    cached = _CACHE.get((store, head)) if store is not None else None
    if cached is not None and cached[0] == key:
        return cached[1]
    found: Mapping[str, eta.Estimate]
    try:
        if head is None:
            line = whole_line(tx, key[1])
        else:
            line = _line(tx, key[1], tx.rows("eta_head", limit=head))
        found = eta.simulate(line, run_times(tx))
    except Exception as exc:
        # An estimate is a forecast: a rule it cannot play must not fail the read that
        # shows it (nor the answer to a submit, which has already been committed). Kept
        # like estimates made: the same line fails the same way until it changes.
        log.warning(
            "no estimates: simulating the line failed: %r", exc,
            exc_info=log.isEnabledFor(logging.DEBUG),
        )  # fmt: skip
        found = NoEstimates(f"simulating the line failed: {exc}")
    if store is not None:
        _CACHE[(store, head)] = (key, found)
    return found


def whole_line(tx: Tx, now: float) -> lineup.Line:
    """Every task running or in line, as the simulation sees it at `now`."""
    return _line(tx, now, tx.rows("eta_line"))


def _line(tx: Tx, now: float, rows: Iterable[Mapping[str, Any]]) -> lineup.Line:
    """The line of `rows` (of `eta_line` or `eta_head`) as the simulation sees it at `now`,
    with the settings, the resource guards and the forecast of the whole store."""
    by_status: dict[Status, list[lineup.Entry]] = {s: [] for s in Status}
    for row in rows:
        task = line_task(row)
        by_status[task.status].append(task)
    settings = read_settings(tx)
    arrivals, span = _arrivals(tx, now)
    throttles = provider.throttles(tx)
    guards = tx.rows("nodes_guards", since=now - LEASE_SECONDS)
    return lineup.Line(
        running=by_status[Status.RUNNING],
        queued=by_status[Status.QUEUED],
        waiting=by_status[Status.WAITING],
        held=by_status[Status.HELD],
        limits=backoff.limits_under(settings.limits, throttles),
        now=now,
        paused=bool(settings["paused"]),
        admission=_admission(guards),
        aging_interval=settings["aging_interval"],
        arrivals=arrivals,
        forecast=span,
        rates=rates.load_book(tx, settings.rates, now) if settings.rates else None,
        holds=backoff.holds(throttles),
        budgets=budgets.load_book(tx, settings.budgets, now),
        **_fair(tx, settings, by_status[Status.QUEUED], now),
        served=bool(guards),
        functions=serving.served_names(tx),
    )


def _fair(tx: Tx, settings: Settings, queued: list[lineup.Entry], now: float) -> dict[str, Any]:
    """The fields of `lineup.Line` for fairness, if it is on (see scheduler/fairness): the
    virtual times of the fair order, the rule and each value's pass."""
    fairness = Fairness.from_setting(settings["fairness"])
    if fairness is None:
        return {}
    aging = settings["aging_interval"]
    ordered = policy.order(queued, now, aging)
    passes = fair.passes(tx, fairness)
    band = lambda t: policy.band_key(t, now, aging)  # noqa: E731
    fair_times = virtual_times(ordered, fairness, passes, band)
    return {"fair": fair_times, "fairness": fairness, "passes": passes}


def _admission(guards: Sequence[Mapping[str, Any]]) -> lineup.Admission | None:
    """What the resource guards of the live nodes (`guards`, rows of `nodes_guards`)
    allow: nothing held back while one of them has no verdict (it starts what the others
    hold); a hold if all hold; else the highest of their adaptive limits (a held node
    starts nothing, the others fill up to their own limit)."""
    if not guards or any(not g["pressure_hold"] and g["pressure_limit"] is None for g in guards):
        return None
    limits = [int(g["pressure_limit"]) for g in guards if not g["pressure_hold"]]
    return lineup.Admission(limit=max(limits)) if limits else lineup.Admission(held=True)


def _arrivals(tx: Tx, now: float) -> tuple[list[lineup.Arrival], float]:
    """The rates at which new work joined the line ahead of the tasks in line, per agent
    type and priority, over the last ARRIVAL_WINDOW seconds, and that span.

    Only submits count: a task moved up (priority raise, Start next, Start now) was
    already in line and in the simulation, ahead of a given task as often as behind it;
    counted as new work it made estimates late. Submits that would queue behind every
    task in line move no estimate and are left out, and so are those at normal priority:
    played in for the sake of low-priority tasks, the main stream of submits would
    multiply the cost of every estimate (low-priority estimates stay early while normal
    work keeps coming)."""
    lowest = _lowest(tx)
    if lowest is None or lowest == Priority.URGENT:  # nothing can arrive ahead
        return [], 0.0
    last = tx.one("events_last")
    after = 0 if last is None else max(0, int(last["seq"]) - SCAN)
    first = tx.one("event_first_after", after=after)
    if first is None:
        return [], 0.0
    since = max(now - ARRIVAL_WINDOW, float(first["at"]))
    counts: dict[tuple[str | None, int], int] = {}
    # Only submits above `lowest` (urgent, high) are read: the main stream is not.
    ahead = [f'%"priority":"{Priority(p).label}"%' for p in range(lowest)]
    for row in tx.rows("eta_arrivals", after=after, first=ahead[0], second=ahead[-1]):
        if not since <= row["at"] <= now:
            continue
        data = json.loads(row["data"])
        priority = int(Priority.parse(data["priority"]))
        if data.get("to") in ("queued", "waiting") and priority < lowest:
            stream = (row["agent"], priority)
            counts[stream] = counts.get(stream, 0) + 1
    span = max(now - since, MIN_SPAN)
    found = [lineup.Arrival(agent, priority, n / span) for (agent, priority), n in counts.items()]
    return found, span


def _lowest(tx: Tx) -> int | None:
    """The lowest priority in line (queued or waiting) as far as the forecast reads it:
    normal when any task is normal or lower (see `_arrivals`), else the lowest of the
    higher ones; None when the line is empty. A few index seeks, however long the line."""
    for priority in (Priority.NORMAL, Priority.HIGH, Priority.URGENT):
        if tx.one("eta_in_line_from", priority=int(priority)) is not None:
            return int(priority)
    return None


def with_estimate(
    task: Task, estimates: Mapping[str, eta.Estimate], now: float, **changes: Any
) -> Task:
    """`task` with its estimate (and `changes`), in one copy, as of `now` (a run past
    its expected end is overdue); in line when the line could not be simulated, with why
    it has none."""
    found = estimates.get(task.id)
    if found is not None:
        changes.update(eta_start=found.start, eta_finish=found.finish, eta_basis=found.basis)
        overdue = found.due is not None and found.due < now
        changes.update(eta_unavailable=found.unavailable, eta_overdue=overdue)
        if found.waiting is not None and task.waiting_reason is None:
            changes["waiting_reason"] = found.waiting
    elif isinstance(estimates, NoEstimates) and task.status in IN_LINE:
        changes["eta_unavailable"] = estimates.why
    return copy_task(task, **changes) if changes else task


def add_samples(tx: Tx, scope: tuple[str, str], seconds: list[float], now: float) -> None:
    """Add `seconds` to the window of `scope`, keeping its last WINDOW samples, and its
    estimate (which readers of the dispatch gap take as it is)."""
    kind, name = scope
    row = tx.one("run_time_get", scope=kind, name=name)
    samples = [] if row is None else list(json.loads(row["samples"]))
    samples = [*samples, *(round(s, 3) for s in seconds)][-WINDOW:]
    estimate = durations.robust_mean(samples) if scope == GAP else durations.fit(samples).mean
    tx.run(
        "run_time_put",
        scope=kind,
        name=name,
        samples=json.dumps(samples),
        estimate=estimate,
        runs=len(samples),
        now=now,
    )


def seconds_until_room(
    tx: Tx,
    now: float,
    estimates: Mapping[str, eta.Estimate],
    parent_id: str | None = None,
    user: str | None = None,
) -> float | None:
    """When a refused submit may succeed, from `line_estimates`: the next start of a task
    in line (a place in the queue frees; with `user`, one of that user's), or with
    `parent_id` the next end among its active children; None if no estimate says."""
    if user is not None:
        mine = [str(r["id"]) for r in tx.rows("pending_of_user", user=user)]
        starts = [estimates[i].start for i in mine if i in estimates]
    elif parent_id is None:
        running = {str(r["id"]) for r in tx.rows("tasks_running")}
        starts = [e.start for i, e in estimates.items() if i not in running]
    else:
        children = [r["id"] for r in tx.rows("active_children_ends", parent_id=parent_id)]
        starts = [estimates[c].finish for c in children if c in estimates]
    known = [s for s in starts if s is not None]
    return max(0.0, min(known) - now) if known else None
