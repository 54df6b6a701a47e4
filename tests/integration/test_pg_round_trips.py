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

import psycopg
import pytest
from psycopg import _pipeline_base

from slotline.models import Status
from slotline.store import Claim, Store, open_store
from slotline.store import claim as claiming
from slotline.store.claim import ClaimResult
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


# A hand-off's statements (each costs the claim tens of microseconds of psycopg's Python):
# BEGIN; the write lock with the planner's settings for reads by index; the read-ahead of
# the report (its attempt, task and dependents) and the clock; the end (attempt, task);
# the line and the answer (what expires, "start now", the slots held, the head of the
# line, the next TTL, kill requests, the node's row, the latest finishes); the start
# (attempt, task); the events with the NOTIFY; COMMIT. No savepoint, and the settings
# are not put back: no read that is not by index follows.
HAND_OFF_STATEMENTS = 20


def test_a_hand_off_sends_no_statement_it_does_without(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given one slot, a run in it and tasks waiting, after a first hand-off (which wrote
    # the run-time windows: the next claim within a second leaves its samples to a later
    # one, `store/windows.py`),
    store.set_setting("max_concurrent", 1)
    store.submit_many([{"command": ["true"]} for _ in range(3)])
    first = store.claim("n1")
    assert first.now is not None
    now = first.now

    def ended(claimed: ClaimResult) -> Report:
        (run,) = [c.attempt for c in claimed.claims]
        store.record_start(run.id, run.token, pid=4242)
        return Report(run.id, run.token, 0)

    second = store.claim("n1", now=now + 0.1, finished=[ended(first)], watcher="w")
    report = ended(second)
    sent: list[str] = []
    execute, executemany = psycopg.Cursor.execute, psycopg.Cursor.executemany

    def counted(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kwargs)

    def counted_many(self: psycopg.Cursor[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return executemany(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    monkeypatch.setattr(psycopg.Cursor, "executemany", counted_many)

    # when the node reports the next end and claims the last task,
    result = store.claim("n1", now=now + 0.2, finished=[report], watcher="w")

    # then the claim ends one and starts one in as many statements as it needs.
    assert result.finished == [None]
    assert len(result.claims) == 1
    assert not any("SAVEPOINT" in text for text in sent), sent
    assert len(sent) == HAND_OFF_STATEMENTS, "\n".join(text[:70] for text in sent)
