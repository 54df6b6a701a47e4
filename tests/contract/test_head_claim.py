"""The claim's common case (`store/head_claim.py`) held to the reference model: on random
lines (priorities, boosts, kinds, start times, runs holding or giving back their slot)
and random limits, the store's claim starts the same tasks, in the same order, and says
to look again at the same time as `policy.plan` on a snapshot of the same line; on both
stores. Then the same with what a claim does besides: the reports it commits first (the
slots they free), the queue TTLs it expires, a caller's `limit` and the node's `slots`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotline.models import Kind, Priority, Status, Task
from slotline.scheduler import policy
from slotline.store import Store, head_claim
from slotline.store.runs import Report
from slotline.store.starts import Claim

from .conftest import Clock

FUNCTIONS = ("f", "g")
# Each example sets up a line in the test's store, and empties it again.
EXAMPLES = settings(
    max_examples=70,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@dataclass(frozen=True)
class Queued:
    priority: Priority
    kind: str  # "command", or a function's name
    delay: float | None  # None: may start at once; else seconds after the submit
    boosted: bool


@dataclass(frozen=True)
class Line:
    running: int  # runs claimed beforehand
    released: int  # of which this many gave their slot back (interactive, waiting)
    queued: list[Queued]
    max_concurrent: int
    kinds: frozenset[str]
    functions: frozenset[str] | None
    wait: float  # seconds from the submits to the claim


queued = st.builds(
    Queued,
    priority=st.sampled_from(list(Priority)),
    kind=st.sampled_from(["command", *FUNCTIONS]),
    delay=st.sampled_from([None, None, 5.0, 50.0, 500.0]),
    boosted=st.booleans(),
)


@st.composite
def lines(draw: st.DrawFn) -> Line:
    running = draw(st.integers(0, 4))
    return Line(
        running=running,
        released=draw(st.integers(0, running)),
        queued=draw(st.lists(queued, max_size=14)),
        max_concurrent=draw(st.integers(0, 7)),
        kinds=draw(st.sampled_from([frozenset({"command"}), frozenset({"command", "callable"})])),
        functions=draw(st.sampled_from([None, frozenset({"f"}), frozenset(FUNCTIONS)])),
        wait=draw(st.sampled_from([0.0, 10.0, 100.0])),
    )


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each claim took the common case (the spy records it)."""
    taken: list[bool] = []
    real = head_claim.decide

    def spy(*args: Any, **kwargs: Any) -> head_claim.Decided | None:
        found = real(*args, **kwargs)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(head_claim, "decide", spy)
    return taken


@EXAMPLES
@given(line=lines())
def test_the_common_case_decides_as_the_plan(
    store: Store, clock: Clock, spied: list[bool], line: Line
) -> None:
    runs = _set_up(store, clock, line)
    try:
        now = clock.advance(line.wait)
        expected = _plan(store, line, now)
        spied.clear()
        result = store.claim("node", now=now, kinds=line.kinds, functions=line.functions)
        runs += result.claims
        assert spied == [True], "the claim did not take the common case"
        assert [c.task.id for c in result.claims] == [s.task_id for s in expected.start]
        # (and, with run times left to write, no later than their write is due)
        wakes = [expected.next_wake, store._run_times.next_write()]
        assert result.next_wake == min((w for w in wakes if w is not None), default=None)
        for claimed in result.claims:  # as a read of them returns them
            stored = store.get(claimed.task.id)
            assert replace(claimed.task, attempts=stored.attempts) == stored
            assert stored.attempts[-1] == claimed.attempt
    finally:
        _clean_up(store, clock, runs)


def _set_up(store: Store, clock: Clock, line: Line) -> list[Claim]:
    """The runs (some of them giving their slot back), then the line."""
    store.set_setting("max_concurrent", 100)
    for _ in range(line.running):
        store.submit({"command": ["true"], "interactive": True}, now=clock.now)
    runs = store.claim("setup", now=clock.now).claims
    for claimed in runs[: line.released]:
        attempt = claimed.attempt
        assert store.mark_needs_input(claimed.task.id, attempt.id, "quiet", clock.now, True)
    for item in line.queued:
        spec: dict[str, Any] = {"priority": int(item.priority), "delay": item.delay}
        if item.kind == "command":
            spec["command"] = ["true"]
        else:
            spec["callable"] = item.kind
        task = store.submit(spec, now=clock.now)
        if item.boosted:
            store.boost(task.id)
    store.set_setting("max_concurrent", line.max_concurrent)
    return runs


def _plan(store: Store, line: Line, now: float) -> policy.Plan[Task]:
    """What the reference model decides on a snapshot of the store's line."""
    tasks = store.list_tasks(limit=1000)
    running = [t for t in tasks if t.holds_slot]
    waiting = [t for t in tasks if t.status is Status.QUEUED]
    snapshot = policy.Snapshot(
        running=running,
        queued=policy.order(waiting, now),
        limits=policy.Limits(max_concurrent=line.max_concurrent),
        now=now,
    )

    def runnable(task: Task) -> bool:
        if task.kind is Kind.CALLABLE and line.functions is not None:
            return task.callable in line.functions
        return task.kind.value in line.kinds

    return policy.plan(snapshot, runnable=runnable)


def _clean_up(store: Store, clock: Clock, runs: list[Claim]) -> None:
    """An empty line again, for the next example: every run ended, every task cancelled."""
    for claimed in runs:
        attempt = claimed.attempt
        store.finish(attempt.id, attempt.token, 0, None, now=clock.now)
    for task in store.list_tasks(limit=1000):
        if task.status is Status.QUEUED:
            store.cancel(task.id)


@dataclass(frozen=True)
class Case:
    running: int
    finish: int
    queued: list[tuple[int, float | None, float | None]]  # priority, delay, ttl
    max_concurrent: int
    limit: int | None
    slots: int | None
    wait: float


@st.composite
def cases(draw: st.DrawFn) -> Case:
    running = draw(st.integers(0, 4))
    return Case(
        running=running,
        finish=draw(st.integers(0, running)),
        queued=draw(
            st.lists(
                st.tuples(
                    st.sampled_from([0, 1, 2, 3]),
                    st.sampled_from([None, None, 5.0, 500.0]),
                    st.sampled_from([None, None, 20.0]),
                ),
                max_size=14,
            )
        ),
        max_concurrent=draw(st.integers(0, 7)),
        limit=draw(st.sampled_from([None, None, 0, 1, 3])),
        slots=draw(st.sampled_from([None, None, 1, 2, 5])),
        wait=draw(st.sampled_from([0.0, 10.0, 100.0])),
    )


@EXAMPLES
@given(case=cases())
def test_the_claim_decides_as_the_plan_with_its_reports_expiries_and_caps(
    store: Store, clock: Clock, spied: list[bool], case: Case
) -> None:
    store.set_setting("max_concurrent", 100)
    for _ in range(case.running):
        store.submit({"command": ["true"]}, now=clock.now)
    runs = store.claim("setup", now=clock.now).claims
    for prio, delay, ttl in case.queued:
        spec: dict[str, Any] = {"command": ["true"], "priority": prio, "delay": delay}
        if ttl is not None and (delay is None or delay < ttl):
            spec["queue_ttl"] = ttl
        store.submit(spec, now=clock.now)
    store.set_setting("max_concurrent", case.max_concurrent)
    now = clock.advance(case.wait)
    # Expected: the plan on what the line is after the reports and the expiries.
    done = runs[: case.finish]
    tasks = store.list_tasks(limit=1000)
    ended = {c.task.id for c in done}
    running = [t for t in tasks if t.holds_slot and t.id not in ended]
    waiting = [
        t
        for t in tasks
        if t.status is Status.QUEUED
        and not (t.queue_ttl is not None and t.created_at + t.queue_ttl <= now)
    ]
    cap = case.max_concurrent if case.limit is None else min(case.limit, case.max_concurrent)
    plan = policy.plan(
        policy.Snapshot(
            running=running,
            queued=policy.order(waiting, now),
            limits=policy.Limits(max_concurrent=cap),
            now=now,
        ),
        runnable=lambda t: t.kind is Kind.COMMAND,
    )
    expected = [s.task_id for s in plan.start]
    if case.slots is not None:
        expected = expected[: case.slots]
    spied.clear()
    reports = [Report(c.attempt.id, c.attempt.token, 0) for c in done]
    result = store.claim("node", now=now, limit=case.limit, slots=case.slots, finished=reports)
    try:
        assert [c.task.id for c in result.claims] == expected, f"common case taken: {spied}"
    finally:
        for c in [*runs[case.finish :], *result.claims]:
            store.finish(c.attempt.id, c.attempt.token, 0, None, now=now)
        for t in store.list_tasks(limit=1000):
            if t.status is Status.QUEUED:
                store.cancel(t.id)
