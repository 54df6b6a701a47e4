"""Queue statistics: counts, wait and run times per agent type, throughput."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotline.models import Attempt, Kind, Priority, Status, Task
from slotline.stats import compute, percentile

NOW = 1_000_000.0
_ids = itertools.count(1)

Runs = Sequence[tuple[float, float | None]]
MakeTask = Callable[..., Task]


def attempt(task_id: str, number: int, started: float, finished: float | None) -> Attempt:
    return Attempt(
        id=f"a{next(_ids)}",
        task_id=task_id,
        number=number,
        token="t",
        node_id="n",
        pid=None,
        pid_started=None,
        started_at=started,
        finished_at=finished,
        exit_code=None if finished is None else 0,
        outcome=None if finished is None else "succeeded",
        reason=None,
        over_limit=False,
        lease_expires_at=None,
        log_path=None,
    )


@pytest.fixture
def make_task() -> MakeTask:
    """A task created at `created`, queued at `queued` (default: created), with `runs`
    as (start, end) pairs, relative to NOW."""

    def make(
        status: Status = Status.SUCCEEDED,
        agent: str | None = "claude",
        created: float = -600.0,
        queued: float | None = 0.0,
        runs: Runs = (),
        finished: float | None = None,
    ) -> Task:
        task_id = f"t{next(_ids)}"
        attempts = tuple(
            attempt(task_id, i, NOW + start, None if end is None else NOW + end)
            for i, (start, end) in enumerate(runs, 1)
        )
        if finished is None and status.terminal and runs and runs[-1][1] is not None:
            finished = runs[-1][1]
        return Task(
            id=task_id, kind=Kind.COMMAND, command=("true",), callable=None, args={},
            title="t", agent=agent, workspace=None, user=None, labels={}, env={},
            priority=Priority.NORMAL, boosted=False, start_now=False, rank="r", status=status,
            status_reason=None, depends_on=(), parent_id=None, depth=0, max_attempts=1,
            backoff=1.0, timeout=None, queue_ttl=None, not_before=None, kill_request=None,
            restart_requested=False, created_at=NOW + created,
            queued_at=None if queued is None else NOW + created + queued,
            started_at=attempts[-1].started_at if attempts else None,
            finished_at=None if finished is None else NOW + finished, exit_code=None,
            failure_reason=None, attempt_count=len(attempts), attempt_base=0,
            current_attempt=None, attempts=attempts,
        )  # fmt: skip

    return make


def test_an_empty_queue_has_zero_counts_and_no_timings() -> None:
    stats = compute([], NOW)
    assert stats.total == 0
    assert set(stats.counts) == {s.value for s in Status}
    assert all(n == 0 for n in stats.counts.values())
    assert stats.agents == []
    assert stats.throughput.per_minute_last_hour == 0.0
    assert stats.throughput.per_minute_overall is None
    assert stats.to_dict()["throughput"]["since"] is None


def test_counts_per_state_and_agents_grouped_with_a_dash_for_none(make_task: MakeTask) -> None:
    tasks = [
        make_task(Status.QUEUED),
        make_task(Status.RUNNING, runs=[(-10, None)]),
        make_task(Status.SUCCEEDED, agent=None, runs=[(-500, -400)]),
        make_task(Status.FAILED, agent="aider", runs=[(-500, -450)]),
    ]
    stats = compute(tasks, NOW)
    assert stats.total == 4
    assert (stats.counts["queued"], stats.counts["running"]) == (1, 1)
    assert (stats.counts["succeeded"], stats.counts["failed"], stats.counts["held"]) == (1, 1, 0)
    assert [a.agent for a in stats.agents] == ["-", "aider", "claude"]
    claude = stats.agents[2]
    assert (claude.tasks, claude.counts) == (2, {"queued": 1, "running": 1})


def test_wait_is_from_queued_to_first_start_and_run_covers_every_ended_attempt(
    make_task: MakeTask,
) -> None:
    # Given a task queued at -600 that waited 10 s, failed after 20 s, then was retried
    # for 40 s, and a task that waited 30 s and ran 60 s,
    retried = make_task(created=-600, runs=[(-590, -570), (-560, -520)])
    other = make_task(created=-600, runs=[(-570, -510)])
    # a running one (its run has not ended) and a queued one (it has not started).
    running = make_task(Status.RUNNING, created=-100, runs=[(-50, None)])
    queued = make_task(Status.QUEUED, created=-100)
    (claude,) = compute([retried, other, running, queued], NOW).agents
    # Then the retry is no extra wait, and only ended attempts count as runs.
    assert claude.wait.count == 3
    assert claude.wait.avg == pytest.approx((10 + 30 + 50) / 3)
    assert claude.wait.p50 == pytest.approx(30)
    assert claude.run.count == 3
    assert claude.run.avg == pytest.approx(40)
    assert claude.run.p50 == pytest.approx(40)
    assert claude.run.p95 == pytest.approx(58)  # between 40 and 60, interpolated


def test_a_restarted_task_waits_from_its_requeue(make_task: MakeTask) -> None:
    # Ran once at -500, restarted (queued again) at -100, started again at -95.
    task = make_task(created=-600, queued=500, runs=[(-500, -450), (-95, -90)])
    (claude,) = compute([task], NOW).agents
    assert claude.wait.count == 1
    assert claude.wait.avg == pytest.approx(5)


def test_a_task_that_never_queued_has_no_wait(make_task: MakeTask) -> None:
    waiting = make_task(Status.WAITING, queued=None)
    (claude,) = compute([waiting], NOW).agents
    assert claude.wait == type(claude.wait)()


def test_throughput_counts_tasks_that_ran_to_an_end(make_task: MakeTask) -> None:
    tasks = [
        make_task(created=-7200, runs=[(-7000, -6000)]),  # more than an hour ago
        make_task(created=-3000, runs=[(-2000, -1000)]),
        make_task(Status.FAILED, created=-3000, runs=[(-900, -600)]),
        make_task(Status.CANCELLED, created=-3000, runs=[(-900, -300)]),  # stopped running
        make_task(Status.CANCELLED, created=-3000, finished=-200),  # never ran: not counted
        make_task(Status.EXPIRED, created=-3000, finished=-200),  # never ran: not counted
        make_task(Status.RUNNING, created=-3000, runs=[(-100, None)]),
    ]
    throughput = compute(tasks, NOW).throughput
    assert (throughput.finished, throughput.finished_last_hour) == (4, 3)
    assert throughput.per_minute_last_hour == pytest.approx(3 / 60)
    assert throughput.per_minute_overall == pytest.approx(4 / 120)
    assert throughput.since == NOW - 7200


def test_to_dict_is_plain_json(make_task: MakeTask) -> None:
    data = compute([make_task(runs=[(-590, -580)])], NOW).to_dict()
    assert data["total"] == 1
    assert data["at"].endswith("Z")
    (claude,) = data["agents"]
    assert claude == {
        "agent": "claude",
        "tasks": 1,
        "counts": {"succeeded": 1},
        "wait": {"count": 1, "avg": 10.0, "p50": 10.0, "p95": 10.0},
        "run": {"count": 1, "avg": 10.0, "p50": 10.0, "p95": 10.0},
    }
    assert data["throughput"]["finished"] == 1


def test_percentile_interpolates() -> None:
    assert percentile([1.0], 95) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([0.0, 10.0], 95) == pytest.approx(9.5)
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=50), st.floats(0, 100))
def test_percentile_lies_within_the_samples(values: list[float], q: float) -> None:
    ordered = sorted(values)
    assert ordered[0] <= percentile(ordered, q) <= ordered[-1]
