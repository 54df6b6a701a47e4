"""How many round trips a node's claim costs on PostgreSQL, whatever it carries.

A claim holds the store's write lock from its first round trip to its commit, so every
round trip it waits for is time no other node can claim. Its reads go together: with
the locks and the clock, the reports' attempts, tasks and dependents; once the reports
are in, the line and what the claim answers (and the run-time windows the ends add to);
then the commit. These tests count the Syncs psycopg sends (each is one
round trip) for claims with more and more in them.
"""

from __future__ import annotations

from typing import Any

import pytest
from psycopg import _pipeline_base

from slotline.models import Status
from slotline.store import Claim, Store, open_store
from slotline.store import claim as claiming
from slotline.store.runs import Report

pytestmark = pytest.mark.postgres

# BEGIN, the locks and the read-ahead of the reports; the line and the answer; COMMIT.
ROUND_TRIPS = 3


@pytest.fixture
def store(pg_store: Store) -> Store:
    return pg_store


@pytest.fixture
def syncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A counter of the Syncs sent (psycopg's own method: one Sync, one round trip)."""
    count = [0]
    enqueue = _pipeline_base.BasePipeline._enqueue_sync

    def counted(self: _pipeline_base.BasePipeline) -> None:
        count[0] += 1
        enqueue(self)

    monkeypatch.setattr(_pipeline_base.BasePipeline, "_enqueue_sync", counted)
    return count


@pytest.mark.parametrize("runs", [1, 4, 8])
@pytest.mark.parametrize("waiting", ["as many waiting", "none waiting"])
def test_a_claim_that_ends_runs_takes_the_same_few_round_trips(
    store: Store, syncs: list[int], runs: int, waiting: str
) -> None:
    # Given `runs` running tasks of one agent type (with processes: their times count)
    # and as many more in line, or none,
    store.set_setting("max_concurrent", runs)
    more = runs if waiting == "as many waiting" else 0
    store.submit_many([{"command": ["true"], "agent": "claude"} for _ in range(runs + more)])
    running = store.claim("n1").claims
    assert len(running) == runs
    for claimed in running:
        store.record_start(claimed.attempt.id, claimed.attempt.token, pid=4242)
    reports = [Report(c.attempt.id, c.attempt.token, 0) for c in running]

    # when the node reports their ends and claims in one transaction,
    syncs[0] = 0
    result = store.claim("n1", finished=reports)

    # then every end is committed, every freed slot is filled again (or the line has
    # drained), and the claim waited for a fixed number of round trips, not for a few
    # per run (one more when it drains the line: it asks, under the events lock, whether
    # anything is left to run).
    assert result.finished == [None] * runs
    assert len(result.claims) == more
    assert syncs[0] == ROUND_TRIPS + (0 if more else 1)
    with store._transaction(write=False) as tx:
        times = {(r["scope"], r["name"]): r["runs"] for r in tx.rows("run_times_all")}
    assert times[("agent", "claude")] == runs
    if not more:
        assert [e.kind for e in store.events()][-1] == "drained"


def test_an_empty_claim_takes_no_more_round_trips(store: Store, syncs: list[int]) -> None:
    store.claim("n1")  # the configuration is read once, then kept while it is unchanged
    syncs[0] = 0
    assert store.claim("n1").claims == []
    assert syncs[0] <= ROUND_TRIPS


def test_a_submit_committed_while_a_claim_decides_keeps_it_from_saying_drained(
    store: Store, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the last task running,
    store.submit({"command": ["true"]})
    (run,) = store.claim("n1").claims
    other = open_store(pg_url)
    late: list[str] = []
    deadline = claiming._next_deadline

    def submitting(*args: Any, **kwargs: Any) -> float | None:
        # (a submit takes the submit lock, not the write lock the claim holds)
        late.append(other.submit({"command": ["true"]}).id)
        return deadline(*args, **kwargs)

    # when a claim ends it and, while it decides, another process submits a task,
    monkeypatch.setattr(claiming, "_next_deadline", submitting)
    try:
        store.claim("n1", kinds=frozenset({"callable"}), finished=[_report(run)])
    finally:
        other.close()

    # then the line has not drained: a task waits in it.
    assert late
    assert store.get(late[0]).status is Status.QUEUED
    assert "drained" not in [e.kind for e in store.events()]


def _report(claim: Claim) -> Report:
    return Report(claim.attempt.id, claim.attempt.token, 0)
