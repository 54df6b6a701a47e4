"""Prometheus metrics, read from the store at scrape time so every node and process counts.

Gauges (tasks by state, running by key, queue depth, capacity) are read fresh; waits,
run durations, claims and failures are folded in from the event log incrementally, so a
scrape reads only the events since the previous one.
"""

from __future__ import annotations

import bisect
import threading
from collections import Counter
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from slotline.models import Event, Status
from slotline.store import Store

# Seconds; agent runs are long, so the buckets reach a few hours.
BUCKETS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0)
FINISH_KINDS = frozenset({"succeeded", "failed", "cancelled", "terminated", "retry"})
FAILURE_KINDS = frozenset({"failed", "terminated", "retry"})
RUNNING_KEYS = ("agent", "workspace", "user")
PAGE = 1000


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        value = max(0.0, value)
        self.counts[bisect.bisect_left(BUCKETS, value)] += 1
        self.total += value

    def family(self, name: str, documentation: str) -> HistogramMetricFamily:
        cumulative, buckets = 0, []
        for bound, count in zip((*map(str, BUCKETS), "+Inf"), self.counts, strict=True):
            cumulative += count
            buckets.append((bound, float(cumulative)))
        return HistogramMetricFamily(name, documentation, buckets=buckets, sum_value=self.total)


class StoreCollector(Collector):
    """Collects slotline's metrics from one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._seq = 0
        self._ready_since: dict[str, float] = {}
        self._started: dict[str, float] = {}
        self.waits = _Histogram()
        self.runs = _Histogram()
        self.claims: Counter[bool] = Counter()
        self.finished: Counter[str] = Counter()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        # What a user token may scrape: no label value names another user's task.
        self.aggregate_registry = CollectorRegistry(auto_describe=False)
        self.aggregate_registry.register(_Aggregated(self))

    def _fold(self, event: Event) -> None:
        data, task_id = event.data, event.task_id
        if task_id is None:
            return
        if event.kind == "claimed":
            self.waits.observe(event.at - self._ready_since.pop(task_id, event.at))
            self.claims[bool(data.get("over_limit"))] += 1
            self._started[str(data.get("attempt"))] = event.at
        elif event.kind in FINISH_KINDS and data.get("attempt"):
            started = self._started.pop(str(data["attempt"]), None)
            if started is not None:
                self.runs.observe(event.at - started)
            self.finished[event.kind] += 1
        if data.get("to") == Status.QUEUED.value and data.get("from") != Status.QUEUED.value:
            self._ready_since[task_id] = event.at
        elif data.get("to") in (Status.CANCELLED.value, Status.EXPIRED.value):
            self._ready_since.pop(task_id, None)

    def _catch_up(self) -> None:
        while True:
            batch = self.store.events(self._seq, PAGE)
            for event in batch:
                self._fold(event)
                self._seq = event.seq
            if len(batch) < PAGE:
                return

    def collect(self) -> Iterator[Metric]:
        return self.metrics(per_value=True)

    def metrics(self, per_value: bool) -> Iterator[Metric]:
        """Every metric; with `per_value` False, without `slotline_running`, whose label
        values are other users' names, workspaces and agents."""
        with self._lock:
            self._catch_up()
            yield self.waits.family(
                "slotline_wait_seconds", "Time from entering the queue to being claimed"
            )
            yield self.runs.family("slotline_run_seconds", "Duration of finished attempts")
            claims = CounterMetricFamily(
                "slotline_claims", "Attempts started", labels=["over_limit"]
            )
            for over, count in sorted(self.claims.items()):
                claims.add_metric([str(over).lower()], count)
            yield claims
            ends = CounterMetricFamily(
                "slotline_attempts_finished", "Attempts ended, by outcome", labels=["outcome"]
            )
            for kind, count in sorted(self.finished.items()):
                ends.add_metric([kind], count)
            yield ends
            failures = sum(n for kind, n in self.finished.items() if kind in FAILURE_KINDS)
            yield CounterMetricFamily(
                "slotline_failures", "Attempts that failed or were terminated", value=failures
            )
        yield from self._gauges(per_value)

    def _gauges(self, per_value: bool) -> Iterator[Metric]:
        counts = self.store.counts()
        status = self.store.status(limit=0)  # capacity and the line's length, not the line
        by_state = GaugeMetricFamily("slotline_tasks", "Tasks by state", labels=["state"])
        for state in Status:
            by_state.add_metric([state.value], counts.get(state.value, 0))
        yield by_state
        running = GaugeMetricFamily(
            "slotline_running", "Running tasks by key and value", labels=["key", "value"]
        )
        for key in RUNNING_KEYS:
            values = Counter(t.key_value(key) for t in status.running)
            for value, count in sorted(values.items(), key=lambda kv: str(kv[0])):
                if value is not None:
                    running.add_metric([key, value], count)
        if per_value:
            yield running
        yield GaugeMetricFamily(
            "slotline_queue_depth", "Queued tasks", value=status.queued_total or 0
        )
        yield GaugeMetricFamily(
            "slotline_active", "Running tasks counted by the global limit", value=status.active
        )
        yield GaugeMetricFamily(
            "slotline_max_concurrent", "The global limit", value=status.max_concurrent
        )
        yield GaugeMetricFamily("slotline_paused", "1 when paused", value=int(status.paused))
        yield from self._spend(per_value)

    def _spend(self, per_value: bool) -> Iterator[Metric]:
        """What runs spent (their agent types' `usage` rules), per agent type; without
        `per_value`, the totals only."""
        spent = self.store.spend_by_agent()
        cost = CounterMetricFamily(
            "slotline_cost_usd", "Cost of finished runs in US dollars, as their output said",
            labels=["agent"] if per_value else None,
        )  # fmt: skip
        tokens = CounterMetricFamily(
            "slotline_tokens", "Tokens of finished runs, as their output said",
            labels=["agent", "direction"] if per_value else ["direction"],
        )  # fmt: skip
        if per_value:
            for row in spent:
                cost.add_metric([row.key], row.cost_usd or 0.0)
                tokens.add_metric([row.key, "input"], row.input_tokens or 0)
                tokens.add_metric([row.key, "output"], row.output_tokens or 0)
        else:
            cost.add_metric([], sum(row.cost_usd or 0.0 for row in spent))
            tokens.add_metric(["input"], sum(row.input_tokens or 0 for row in spent))
            tokens.add_metric(["output"], sum(row.output_tokens or 0 for row in spent))
        yield cost
        yield tokens


class _Aggregated(Collector):
    """The metrics of a collector without per-value labels."""

    def __init__(self, collector: StoreCollector) -> None:
        self.collector = collector

    def collect(self) -> Iterator[Metric]:
        return self.collector.metrics(per_value=False)
