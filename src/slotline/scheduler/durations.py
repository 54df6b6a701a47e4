"""Run times as the ETA simulation reads them: per agent type, fitted as log-normal.

A queued task is expected to take the mean of its agent type's distribution (what a sum
of run times grows by), a running one the mean of what is left of a run that has already
lasted as long as it has.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

# When nothing says how long a run takes: what the simulation plays for it (no estimate
# is given on its strength).
DEFAULT_DURATION = 300.0
# Fewer runs than this say too little about the spread: their plain mean is used.
MIN_FIT = 5
# Spreads wider than this are not a log-normal but a mix (a few very long runs): capped.
MAX_SIGMA = 1.5
# Run times shorter than this are taken as this much (a log needs a positive number).
MIN_SECONDS = 0.001

_SQRT2 = math.sqrt(2)


class Timed(Protocol):
    """What a task's run time is looked up by (a `lineup.Entry`, a `Task`)."""

    @property
    def agent(self) -> str | None: ...

    @property
    def expected_duration(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Duration:
    """Expected run time: the mean in seconds, over how many recent runs, and their
    spread (the standard deviation of log seconds; 0 when unknown)."""

    mean: float
    runs: int
    sigma: float = 0.0

    def remaining(self, elapsed: float) -> float:
        """Expected seconds left of a run that has lasted `elapsed`: with a spread, the
        mean of the log-normal beyond `elapsed`, minus `elapsed` (a run that is overdue
        is likely a long one); without, the mean minus `elapsed`."""
        if self.sigma <= 0 or elapsed <= 0 or self.mean <= 0:
            return self.mean - elapsed
        mu = math.log(self.mean) - self.sigma**2 / 2
        z = min((math.log(elapsed) - mu) / self.sigma, 30.0)
        beyond = math.erfc((z - self.sigma) / _SQRT2) / math.erfc(z / _SQRT2)
        return self.mean * beyond - elapsed


def fit(samples: Sequence[float]) -> Duration:
    """The mean and spread of run times `samples`, read as log-normal: from the mean of
    the middle 80% of their logs and from their interquartile range, so that a few
    outliers move neither. The mean, exp(mu + sigma²/2), is what a sum of run times
    grows by; a median or a trimmed mean of the run times themselves (of a skewed
    distribution) falls short of it. Of the logs (symmetric), the trimmed mean is as
    robust as their median and varies less from one window to the next (about 1.03
    against 1.25 sigma/√n): a wait behind many runs moves with it."""
    if len(samples) < MIN_FIT:
        return Duration(statistics.fmean(samples), len(samples))
    logs = sorted(math.log(max(s, MIN_SECONDS)) for s in samples)
    cut = len(logs) // 10
    mu = statistics.fmean(logs[cut : len(logs) - cut])
    q1, _median, q3 = statistics.quantiles(logs, n=4)
    sigma = min((q3 - q1) / 1.349, MAX_SIGMA)  # the IQR of a normal is 1.349 sigma
    return Duration(math.exp(mu + sigma**2 / 2), len(samples), sigma)


@dataclass(frozen=True, slots=True)
class RunTimes:
    """Recent run times: per agent type, and over all tasks."""

    per_agent: Mapping[str, Duration] = field(default_factory=dict)
    overall: Duration | None = None
    # What the simulation plays for a run whose length nothing says, so that the line
    # behind it can still be placed; no estimate rests on it (see `eta.simulate`).
    default: Duration = Duration(DEFAULT_DURATION, 0)
    # Seconds from a run's end to the next start in its slot (the node's dispatch).
    gap: float = 0.0

    def known(self, task: Timed) -> Known | str:
        """A task's expected run time: its own expected_duration (or its agent type's
        configured one, given at submit), else its agent type's recent runs; a task of no
        agent type, all tasks' recent runs. Else why it is unknown (a sentence): the runs
        of other agent types say nothing of this one's."""
        if task.expected_duration is not None:
            return Known(Duration(task.expected_duration, 0), "expected_duration")
        if task.agent is not None:
            found = self.per_agent.get(task.agent)
            if found is None:
                return f"no run of agent {task.agent} has finished yet"
            return Known(found, f"recent runs of agent {task.agent} (n={found.runs})")
        if self.overall is not None:
            return Known(self.overall, f"recent runs of all tasks (n={self.overall.runs})")
        return "no run has finished yet"


@dataclass(frozen=True, slots=True)
class Known:
    """A run time that rests on something: the expected duration, and what."""

    duration: Duration
    basis: str


def robust_mean(samples: Sequence[float]) -> float:
    """The mean of the middle 80% of `samples`: not moved by a few outliers (used for
    the dispatch gap, which is not log-normal but mostly near zero)."""
    ordered = sorted(samples)
    cut = len(ordered) // 10
    return statistics.fmean(ordered[cut : len(ordered) - cut] or ordered)
