"""What is expected to change the line while a task waits: the submits, moves and cancels
seen lately, as a schedule of events for the ETA simulation to play.

A submit ahead of a task delays it by a run. So does a move (a priority raise, Start
next, Start now) of a task that was behind it, but not of one that was already ahead; and
a cancel of a task ahead of it brings it forward. Which task a move or a cancel takes is
not known, so each one is given a place in its agent type's line, spread evenly over it
as picks of a uniform draw would be (a low-discrepancy sequence: the same on every run,
so that an estimate is a function of the store's state). That line includes the tasks
expected to join behind it meanwhile (`JOIN`): a task just submitted has none behind it
in the line as it is, but the moves that overtake it while it waits mostly come from
the tasks submitted after it. Those are counted, not simulated one by one: they queue
behind every task whose estimate they could change.
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# Changes are played in for at most this long ahead, and at most this many per
# simulation, so that an estimate stays cheap and does not rest on a forecast far
# beyond what was seen.
MAX_FORECAST = 300.0
MAX_ARRIVALS = 1_000
# The fractional part of multiples of this (1/φ) spreads picks evenly over [0, 1).
_SPREAD = 0.6180339887498949


class Change(enum.Enum):
    """What a forecast event does to the line."""

    SUBMIT = "submit"  # a new task joins at `priority`, ahead of some of the line
    JOIN = "join"  # a new task joins behind the whole line (not played as a task)
    RAISE = "raise"  # a task of the line moves up to `priority`
    BOOST = "boost"  # a task of the line is made next (Start next)
    BUMP = "bump"  # a task of the line starts now, over the limits (Start now)
    CANCEL = "cancel"  # a task of the line leaves it


@dataclass(frozen=True, slots=True)
class Arrival:
    """A stream of changes expected to go on: `rate` per second, to tasks of an agent
    type (at `priority`: the priority a submit or a raise puts a task at)."""

    agent: str | None
    priority: int
    rate: float
    change: Change = Change.SUBMIT


@dataclass(frozen=True, slots=True)
class Due:
    """One forecast event: when, of which stream, its number (for forecast ids and
    ranks), and for a move or a cancel where in its agent type's line (0 to 1) the task
    it takes is."""

    at: float
    stream: Arrival
    n: int
    pick: float


class Schedule:
    """The forecast events of a line at a steady rate per stream, until `forecast`
    seconds have passed, the budget is spent, or no task of the line is left to start
    (`left`, counted down by the simulation)."""

    def __init__(
        self,
        arrivals: Sequence[Arrival],
        now: float,
        forecast: float,
        left: int,
        behind: Mapping[str | None, int],
    ) -> None:
        self.left = left
        self.until = now + min(forecast, MAX_FORECAST)
        self.budget = MAX_ARRIVALS
        self.count = itertools.count()
        self.picks = itertools.count(1)
        # Each stream's first event comes half an interval in: the count of events by
        # any instant is then the rate times the time elapsed, rounded.
        self.now = now
        self.heap = [
            (now + 0.5 / a.rate, i, a)
            for i, a in enumerate(arrivals)
            if a.rate > 0 and a.change is not Change.JOIN
        ]
        heapq.heapify(self.heap)
        self.queued_behind = behind
        self.joining: dict[str | None, float] = {}
        for a in arrivals:
            if a.change is Change.JOIN:
                self.joining[a.agent] = self.joining.get(a.agent, 0.0) + a.rate

    def joined(self, agent: str | None, clock: float) -> float:
        """How many tasks of agent type `agent` are expected to have joined behind the
        line by `clock` (within the forecast's span)."""
        return self.joining.get(agent, 0.0) * (min(clock, self.until) - self.now)

    def next_at(self) -> float | None:
        if self.left <= 0 or self.budget <= 0 or not self.heap or self.heap[0][0] > self.until:
            return None
        return self.heap[0][0]

    def due(self, clock: float) -> list[Due]:
        """The events up to `clock`, in time order."""
        found = []
        while (at := self.next_at()) is not None and at <= clock:
            _at, i, stream = heapq.heappop(self.heap)
            pick = 0.0 if stream.change is Change.SUBMIT else next(self.picks) * _SPREAD % 1
            found.append(Due(at, stream, next(self.count), pick))
            self.budget -= 1
            heapq.heappush(self.heap, (at + 1 / stream.rate, i, stream))
        return found
