"""The line as the ETA simulation sees it: its entries (a task's few fields the policy
and the estimate read), what the nodes' resource guards allow, the work expected to join,
and the line itself. `eta.simulate` plays it forward; `waiting.reasons` reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from slotline.limits import limit_key_value
from slotline.models import Status
from slotline.pacing.budgets import BudgetBook
from slotline.pacing.rates import RateBook
from slotline.scheduler import policy
from slotline.scheduler.fairness import Fairness


class Entry(NamedTuple):
    """A task as the simulation sees it: only the fields the policy and the estimate
    read, built from a few columns (much cheaper than a full `Task`)."""

    id: str
    agent: str | None
    workspace: str | None
    user: str | None
    labels: Mapping[str, str]
    priority: int
    boosted: bool
    start_now: bool
    rank: str
    status: Status
    depends_on: tuple[str, ...]
    not_before: float | None
    queued_at: float | None
    started_at: float | None
    expected_duration: float | None
    # Read by fairness by parent task only.
    parent_id: str | None = None
    repo: str | None = None
    kind: str = "command"
    # A function task's function (kind "callable").
    callable: str | None = None

    def key_value(self, key: str) -> str | None:
        """The value of a limit key, as `Task.key_value`."""
        return limit_key_value(self, key)


@dataclass(frozen=True, slots=True)
class Admission:
    """What the resource guards of the nodes allow now: `held`, every node holds new
    starts; else `limit`, a cap lower than max_concurrent (their adaptive mode).

    A hold is read as a machine that is full with what runs now (its runs are what press
    it): nothing starts until a run ends, and then no more than run now. With nothing
    running, no end is in sight and queued tasks get no estimate. Neither a hold nor a
    limit is expected to lift: the guard's recovery is not played.
    """

    held: bool = False
    limit: int | None = None

    def apply(self, line: Line, first_end: float) -> tuple[policy.Limits, float, str]:
        """The limits to simulate `line` under, the instant before which nothing new
        starts (`first_end`: when the first running run is expected to end), and what
        `eta_basis` says of it."""
        limits = line.limits
        if self.held:
            cap = sum(1 for t in line.running if limits.in_pool(t))
            note = f"; resource guard holding starts: at most {cap} running"
        else:
            cap, first_end = self.limit or limits.max_concurrent, line.now
            note = f"; resource guard limit {min(cap, limits.max_concurrent)}"
        return replace(limits, max_concurrent=min(cap, limits.max_concurrent)), first_end, note


@dataclass(frozen=True, slots=True)
class Arrival:
    """A stream of work expected to join the line: `rate` tasks per second of an agent
    type at a priority."""

    agent: str | None
    priority: int
    rate: float


@dataclass(frozen=True, slots=True)
class Line:
    """What the simulation sees: the tasks that are running, queued (in queue order),
    waiting on dependencies or held, and what holds starts back."""

    running: Sequence[Entry]
    queued: Sequence[Entry]
    limits: policy.Limits
    now: float
    waiting: Sequence[Entry] = ()
    held: Sequence[Entry] = ()
    paused: bool = False
    # What the nodes' resource guards allow now, if they hold anything back.
    admission: Admission | None = None
    aging_interval: float | None = None
    # Work expected to join the line, and for how long ahead (seconds) to expect it.
    arrivals: Sequence[Arrival] = ()
    forecast: float = 0.0
    # Rate limits with the starts in their windows (the simulation plays its own starts
    # into a copy), and agent types held back by a provider back-off until an instant.
    rates: RateBook | None = None
    holds: Mapping[str, float] = field(default_factory=dict)
    # Budgets with the spend of the runs finished in their windows: a reached one holds
    # its tasks until enough ages out (the spend of runs not finished is not foreseen).
    budgets: BudgetBook | None = None
    # With fairness on: each queued task's virtual time in its band (fairness.py), as of
    # `now`; a task that joins later sorts after its band's.
    fair: Mapping[str, float] | None = None
    # With fairness on: the rule and each value's pass (the store's), for `plan`'s walk.
    fairness: Fairness | None = None
    passes: Mapping[str, float] = field(default_factory=dict)
    # Whether some live node serves the store (heartbeats): with none, nothing starts.
    served: bool = True
    # The functions some live node serves (None: every one): a function task of another
    # waits for a node that serves it, which nothing foresees (no estimate).
    functions: frozenset[str] | None = None

    def unserved(self, task: Entry) -> bool:
        """Whether `task` is a function task no live node serves."""
        return (
            self.functions is not None
            and task.kind == "callable"
            and (task.callable or "") not in self.functions
        )
