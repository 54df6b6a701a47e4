"""Queue statistics computed from stored tasks and their attempts: counts, timings, throughput."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slotline.clock import iso
from slotline.models import Status, Task
from slotline.pacing.spend import Spend, Spent, runs_of, sum_spend

NO_AGENT = "-"
HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class Timing:
    """Summary of a set of durations in seconds; the figures are None without samples."""

    count: int = 0
    avg: float | None = None
    p50: float | None = None
    p95: float | None = None

    @classmethod
    def of(cls, samples: Iterable[float]) -> Timing:
        values = sorted(samples)
        if not values:
            return cls()
        return cls(
            count=len(values),
            avg=sum(values) / len(values),
            p50=percentile(values, 50),
            p95=percentile(values, 95),
        )

    def to_dict(self) -> dict[str, Any]:
        """Seconds, to the millisecond."""
        return {
            "count": self.count,
            "avg": _round(self.avg, 3),
            "p50": _round(self.p50, 3),
            "p95": _round(self.p95, 3),
        }


@dataclass(frozen=True, slots=True)
class AgentStats:
    """One agent type (`-` for tasks without one): its tasks by status, wait and run times."""

    agent: str
    tasks: int
    counts: dict[str, int]
    wait: Timing
    run: Timing

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "tasks": self.tasks,
            "counts": dict(self.counts),
            "wait": self.wait.to_dict(),
            "run": self.run.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Throughput:
    """Tasks that ended after running, per minute: over the last hour and overall."""

    finished: int
    finished_last_hour: int
    per_minute_last_hour: float
    per_minute_overall: float | None
    since: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "finished": self.finished,
            "finished_last_hour": self.finished_last_hour,
            "per_minute_last_hour": _round(self.per_minute_last_hour, 4),
            "per_minute_overall": _round(self.per_minute_overall, 4),
            "since": iso(self.since),
        }


@dataclass(frozen=True, slots=True)
class Stats:
    """What `slotline stats` shows."""

    now: float
    total: int
    counts: dict[str, int]
    agents: list[AgentStats] = field(default_factory=list)
    throughput: Throughput = field(default_factory=lambda: Throughput(0, 0, 0.0, None, None))
    # What the runs spent (cost, tokens), summed per agent type, user, workspace and day.
    spend: Spend = field(default_factory=lambda: Spend(Spent("total"), {}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": iso(self.now),
            "total": self.total,
            "counts": dict(self.counts),
            "agents": [a.to_dict() for a in self.agents],
            "throughput": self.throughput.to_dict(),
            "spend": self.spend.to_dict(),
        }


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of sorted `values`, interpolating between neighbours."""
    if not values:
        raise ValueError("percentile of no values")
    rank = (len(values) - 1) * q / 100.0
    low, high = values[math.floor(rank)], values[math.ceil(rank)]
    return min(high, max(low, low + (high - low) * (rank - math.floor(rank))))


def wait_time(task: Task) -> float | None:
    """Seconds from the task's (latest) entry into the line to the first attempt after it."""
    if task.queued_at is None:
        return None
    starts = [a.started_at for a in task.attempts if a.started_at >= task.queued_at]
    return min(starts) - task.queued_at if starts else None


def ran_to_end(task: Task) -> bool:
    """A task that ended after running: it counts towards throughput."""
    return task.status.terminal and task.finished_at is not None and bool(task.attempts)


def compute(tasks: Iterable[Task], now: float) -> Stats:
    """Counts per status; per agent type: tasks, wait time (queued → first start of that
    stay in line) and run time (each ended attempt); throughput of tasks that ran to an end.

    Throughput overall is finished tasks per minute from the first task's creation to now.
    """
    tasks = list(tasks)
    counts = dict.fromkeys((s.value for s in Status), 0)
    per_agent: dict[str, list[Task]] = {}
    total = 0
    first_created: float | None = None
    finished = finished_last_hour = 0
    for task in tasks:
        total += 1
        counts[task.status.value] += 1
        per_agent.setdefault(task.agent or NO_AGENT, []).append(task)
        first_created = (
            task.created_at if first_created is None else min(first_created, task.created_at)
        )
        if ran_to_end(task):
            finished += 1
            if task.finished_at is not None and task.finished_at >= now - HOUR:
                finished_last_hour += 1
    agents = [_agent_stats(name, group) for name, group in sorted(per_agent.items())]
    overall = None
    if first_created is not None and now > first_created:
        overall = finished / max((now - first_created) / 60.0, 1.0)
    throughput = Throughput(
        finished=finished,
        finished_last_hour=finished_last_hour,
        per_minute_last_hour=finished_last_hour / 60.0,
        per_minute_overall=overall,
        since=first_created,
    )
    return Stats(
        now=now, total=total, counts=counts, agents=agents, throughput=throughput,
        spend=sum_spend(runs_of(tasks)),
    )  # fmt: skip


def _agent_stats(name: str, tasks: list[Task]) -> AgentStats:
    counts: dict[str, int] = {}
    for task in tasks:
        counts[task.status.value] = counts.get(task.status.value, 0) + 1
    waits = (w for w in map(wait_time, tasks) if w is not None)
    runs = (
        a.finished_at - a.started_at for t in tasks for a in t.attempts if a.finished_at is not None
    )
    return AgentStats(
        agent=name,
        tasks=len(tasks),
        counts=dict(sorted(counts.items())),
        wait=Timing.of(waits),
        run=Timing.of(runs),
    )
