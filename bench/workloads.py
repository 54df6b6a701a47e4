"""The benchmark workloads, their sizes, and what one drain reports back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Task kinds, named the same on both sides.
NOOP = "noop"  # a Python callable that does nothing
STAMP = "stamp"  # a Python callable that records when it ran (for hand-off latency)
SLEEP = "sleep"  # a process: `sleep SECONDS`


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big each workload is; `FULL` is what RESULTS.md reports, `QUICK` a smoke run."""

    submit: int  # tasks submitted one at a time (and in one submit_many batch)
    drain: int  # no-op callables drained at `drain_limit`
    drain_limit: int
    procs: int  # `sleep` processes run at `procs_limit`
    procs_limit: int
    sleep: float
    handoff: int  # callables run one after the other at limit 1

    def ideal_procs_seconds(self) -> float:
        """The wall time with zero overhead: ceil(N/K) waves of `sleep` seconds."""
        return math.ceil(self.procs / self.procs_limit) * self.sleep


FULL = Sizes(
    submit=1000, drain=2000, drain_limit=4, procs=200, procs_limit=8, sleep=0.05, handoff=200
)
QUICK = Sizes(submit=200, drain=200, drain_limit=4, procs=40, procs_limit=8, sleep=0.05, handoff=40)


@dataclass(slots=True)
class Drained:
    """What one side reports after draining a pre-filled queue."""

    seconds: float  # from starting the node/consumer until every task has run
    succeeded: int
    # End of one task body to the start of the next, measured inside the task (limit 1).
    gaps: list[float] = field(default_factory=list)
    # slotline only: an attempt's finished_at to the next attempt's started_at, from the store.
    store_gaps: list[float] = field(default_factory=list)
    # slotline's `serve --app` drain only: the node process's peak RSS (KiB).
    node_rss_kb: int | None = None
