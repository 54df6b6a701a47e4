"""Outcomes over time: retries with backoff, queue TTL, and stale reports."""

from __future__ import annotations

import pytest

from slotline.errors import NotFound, StaleAttempt
from slotline.models import Status
from slotline.store import Store

from .conftest import NODE, ClaimFn, Clock, FinishFn, SubmitFn, titles

# -- outcomes and retries -----------------------------------------------------------------


def test_exit_code_zero_succeeds_and_anything_else_fails(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    for name in ("ok", "bad", "crashed"):
        submit(name)
    ok, bad, crashed = claim()

    assert finish(ok, 0).status is Status.SUCCEEDED
    failed = finish(bad, 2)
    assert (failed.status, failed.exit_code, failed.failure_reason) == (
        Status.FAILED,
        2,
        "exit code 2",
    )
    lost = finish(crashed, None, reason="process lost")
    assert (lost.status, lost.failure_reason) == (Status.FAILED, "process lost")
    assert [a.outcome for a in store.get(ok.task.id).attempts] == ["succeeded"]


def test_a_reason_fails_an_attempt_even_with_exit_code_zero(
    submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    submit("a")

    assert finish(claim()[0], 0, reason="timed out").status is Status.FAILED


def test_one_attempt_by_default(submit: SubmitFn, claim: ClaimFn, finish: FinishFn) -> None:
    task = submit("a")

    assert task.max_attempts == 1
    assert finish(claim()[0], 1).status is Status.FAILED
    assert claim() == []


def test_a_failed_attempt_is_retried_after_an_exponential_backoff(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    task = submit("a", max_attempts=3, backoff=10)

    for number, base in ((1, 10), (2, 20)):
        (running,) = claim()
        assert running.attempt.number == number
        clock.advance(1)

        retried = finish(running, 1)

        # Then the task waits in line for backoff * 2^(n-1), with jitter of +-50%.
        assert retried.status is Status.QUEUED
        assert retried.not_before is not None
        delay = retried.not_before - clock.now
        assert 0.5 * base <= delay <= 1.5 * base
        assert f"attempt {number + 1} of 3" in (retried.status_reason or "")
        assert store.get(task.id).position == 1
        # Not before its time, even with free slots; the claim says when to look again.
        clock.advance(delay - 0.01)
        result = store.claim(NODE, now=clock.now)
        assert result.claims == []
        assert result.next_wake == pytest.approx(retried.not_before, abs=1e-3)
        clock.advance(0.01)

    (last,) = claim()
    assert last.attempt.number == 3
    assert finish(last, 1).status is Status.FAILED
    assert [a.outcome for a in store.get(task.id).attempts] == ["failed"] * 3


def test_a_task_waiting_to_retry_does_not_hold_back_the_line(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    store.set_setting("max_concurrent", 1)
    submit("flaky", max_attempts=2, backoff=100)
    submit("next")
    finish(claim()[0], 1)

    assert titles(claim()) == ["next"]


def test_a_retry_can_succeed(
    submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    submit("a", max_attempts=2, backoff=1)
    finish(claim()[0], 1)
    clock.advance(2)

    assert finish(claim()[0], 0).status is Status.SUCCEEDED


def test_backoff_never_exceeds_retry_backoff_max(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    store.set_setting("retry_backoff_max", 4)
    for i in range(20):
        submit(f"t{i}", max_attempts=5, backoff=10)
    store.set_setting("max_concurrent", 20)

    for running in claim():
        retried = finish(running, 1)
        assert retried.not_before is not None
        assert 0 < retried.not_before - clock.now <= 4


# -- queue TTL ----------------------------------------------------------------------------


def test_a_task_not_started_within_its_queue_ttl_expires(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 0)
    queued = submit("queued", queue_ttl=60)
    held = submit("held", queue_ttl=60)
    store.hold(held.id)
    waiting = submit("waiting", queue_ttl=60, depends_on=[queued.id])
    submit("patient")

    clock.advance(59)
    result = store.claim(NODE, now=clock.now)
    assert result.next_wake == pytest.approx(queued.created_at + 60, abs=1e-3)
    assert store.get(queued.id).status is Status.QUEUED

    clock.advance(1)
    claim()

    for task in (queued, held, waiting):
        expired = store.get(task.id)
        assert expired.status is Status.EXPIRED
        assert "60s" in (expired.status_reason or "")
    assert [t.title for t in store.status().queued] == ["patient"]
    events = [e for e in store.events() if e.kind == "expired"]
    assert {e.task_id for e in events} == {queued.id, held.id, waiting.id}


def test_a_task_started_in_time_does_not_expire(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    submit("a", queue_ttl=60)
    clock.advance(30)
    (running,) = claim()
    clock.advance(100)
    claim()

    assert finish(running, 0).status is Status.SUCCEEDED


def test_a_claim_wakes_for_the_next_queue_ttl_of_a_task_it_did_not_start(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given one slot and two tasks with queue TTLs, the first to lapse first in line,
    store.set_setting("max_concurrent", 1)
    first = submit("first", queue_ttl=10)
    second = submit("second", queue_ttl=100)

    # when a claim starts the first,
    result = store.claim(NODE, now=clock.now)

    # then the node is told to look again when the second's TTL lapses, not the first's.
    assert [c.task.id for c in result.claims] == [first.id]
    assert result.next_wake == pytest.approx(second.created_at + 100, abs=1e-3)


def test_a_restarted_task_gets_a_full_queue_ttl_again(
    store: Store, claim: ClaimFn, clock: Clock
) -> None:
    # Given a task that expired, submitted 100 s ago with a TTL of 60 s,
    task = store.submit({"command": ["a"], "queue_ttl": 60}, now=clock.now - 100)
    store.set_setting("max_concurrent", 0)
    claim()
    assert store.get(task.id).status is Status.EXPIRED

    # when it is restarted (now), it waits again for up to 60 s from the restart.
    store.restart(task.id)
    claim()
    assert store.get(task.id).status is Status.QUEUED
    store.set_setting("max_concurrent", 1)
    assert titles(claim()) == ["a"]


# -- stale reports ------------------------------------------------------------------------


def test_a_report_with_a_wrong_token_is_refused_and_changes_nothing(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    task = submit("a")
    (running,) = claim()
    seq = store.last_seq()

    with pytest.raises(StaleAttempt):
        store.finish(running.attempt.id, "not-the-token", 0)
    with pytest.raises(StaleAttempt):
        store.record_start(running.attempt.id, "not-the-token", pid=123)

    assert store.get(task.id).status is Status.RUNNING
    assert store.get(task.id).attempts[0].pid is None
    assert store.last_seq() == seq


def test_a_second_report_of_the_same_attempt_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a")
    (running,) = claim()
    finish(running, 0)
    seq = store.last_seq()

    with pytest.raises(StaleAttempt, match="no longer current"):
        finish(running, 1)

    assert store.get(task.id).status is Status.SUCCEEDED
    assert store.last_seq() == seq


def test_a_report_of_a_superseded_attempt_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    task = submit("a", max_attempts=2, backoff=1)
    (first,) = claim()
    finish(first, 1)
    clock.advance(5)
    (second,) = claim()

    with pytest.raises(StaleAttempt):
        finish(first, 0)
    with pytest.raises(StaleAttempt):
        store.record_start(first.attempt.id, first.attempt.token, pid=1)

    current = store.get(task.id)
    assert current.status is Status.RUNNING
    assert current.current_attempt == second.attempt.id


def test_a_report_of_an_attempt_superseded_by_a_restart_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a")
    (first,) = claim()
    finish(first, 1)
    store.restart(task.id)
    claim()

    with pytest.raises(StaleAttempt):
        finish(first, 0)


def test_a_report_of_an_unknown_attempt_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        store.finish("0" * 32, "token", 0)


def test_record_start_is_visible_on_the_attempt(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    task = submit("a")
    (running,) = claim()

    store.record_start(running.attempt.id, running.attempt.token, pid=4242, log_path="/tmp/x")

    attempt = store.get(task.id).attempts[0]
    assert (attempt.pid, attempt.log_path) == (4242, "/tmp/x")
    assert [a.id for a in store.live_attempts(NODE)] == [running.attempt.id]


def test_a_task_that_started_in_time_is_retried_not_expired(store: Store) -> None:
    # Given a task with a queue TTL that started in time and failed,
    task = store.submit({"command": ["x"], "queue_ttl": 10, "max_attempts": 2, "backoff": 1}, now=0)
    (claim,) = store.claim("n", now=1).claims
    store.finish(claim.attempt.id, claim.attempt.token, 1, now=2)
    # when its retry is due after the TTL has passed,
    retried = store.claim("n", now=100).claims
    # then it runs again rather than expiring.
    assert [c.task.id for c in retried] == [task.id]


def test_an_attempt_that_never_started_goes_back_in_line_uncounted(store: Store) -> None:
    task = store.submit({"command": ["x"], "max_attempts": 1})
    (claim,) = store.claim("n").claims
    store.finish(claim.attempt.id, claim.attempt.token, None, "node died", requeue=True)
    again = store.get(task.id)
    assert again.status is Status.QUEUED
    assert again.attempts[0].outcome == "interrupted"
    (second,) = store.claim("n").claims  # its one attempt is still there to use
    assert second.attempt.number == 2


def test_reaping_refuses_an_attempt_whose_node_is_alive(store: Store) -> None:
    store.submit({"command": ["x"]})
    store.heartbeat("alive", now=100)
    (claim,) = store.claim("alive", now=100, lease=30).claims
    a = claim.attempt
    with pytest.raises(StaleAttempt, match="alive"):
        store.finish(a.id, a.token, None, "reaped", now=120, reap_after=30)  # lease fresh
    store.heartbeat("alive", now=125, lease=1)  # the attempt's lease lapses at 126
    with pytest.raises(StaleAttempt, match="alive"):
        store.finish(a.id, a.token, None, "reaped", now=140, reap_after=30)  # node beat at 125
    done = store.finish(a.id, a.token, None, "reaped", now=200, reap_after=30)
    assert done.status is Status.FAILED
