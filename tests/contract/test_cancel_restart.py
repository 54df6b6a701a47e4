"""Ending and restarting tasks: cancel (and its cascade), terminate, restart, clear."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from slotline.errors import InvalidTransition
from slotline.models import Status, Task
from slotline.stops import CANCEL, RESTART, StopKind
from slotline.store import Store

from .conftest import NODE, ClaimFn, Clock, FinishFn, LineFn, SubmitFn, titles


def waiting_task(store: Store, submit: SubmitFn) -> Task:
    store.set_setting("max_concurrent", 0)
    return submit("x", depends_on=[submit("dep").id])


def held_task(store: Store, submit: SubmitFn) -> Task:
    return store.hold(submit("x").id)


def blocked_task(store: Store, submit: SubmitFn) -> Task:
    dep = submit("dep")
    store.cancel(dep.id)
    return submit("x", depends_on=[dep.id])


def queued_task(store: Store, submit: SubmitFn) -> Task:
    return submit("x")


@pytest.mark.parametrize(
    ("make", "status"),
    [
        (queued_task, Status.QUEUED),
        (waiting_task, Status.WAITING),
        (held_task, Status.HELD),
        (blocked_task, Status.BLOCKED),
    ],
    ids=["queued", "waiting", "held", "blocked"],
)
def test_cancel_of_a_task_not_running_ends_it_at_once(
    store: Store,
    submit: SubmitFn,
    claim: ClaimFn,
    make: Callable[[Store, SubmitFn], Task],
    status: Status,
) -> None:
    task = make(store, submit)
    assert task.status is status

    cancelled = store.cancel(task.id)

    assert cancelled.status is Status.CANCELLED
    assert cancelled.finished_at is not None
    assert store.get(task.id).position is None
    store.set_setting("max_concurrent", 5)
    assert task.id not in {c.task.id for c in claim()}


def test_cancel_of_a_running_task_asks_it_to_stop_and_frees_the_slot_when_it_has(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    store.set_setting("max_concurrent", 1)
    task = submit("a")
    submit("b")
    (running,) = claim()

    requested = store.cancel(task.id[:8])

    # The task still holds its slot until its process is gone.
    assert requested.status is Status.RUNNING
    (kill,) = store.kill_requests(NODE)
    assert (kill.task_id, kill.attempt_id, kill.request) == (task.id, running.attempt.id, CANCEL)
    assert store.kill_requests("other-node") == []
    assert claim() == []

    ended = finish(running, exit_code=-15)

    assert ended.status is Status.CANCELLED
    assert store.get(task.id).attempts[0].outcome == "cancelled"
    assert store.kill_requests(NODE) == []
    assert titles(claim()) == ["b"]


def test_a_cancelled_task_ends_cancelled_even_if_its_process_succeeded(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a", max_attempts=3)
    (running,) = claim()
    store.cancel(task.id)

    assert finish(running, exit_code=0).status is Status.CANCELLED


def test_cancel_of_an_ended_task_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a")
    finish(claim()[0])

    with pytest.raises(InvalidTransition, match=rf"{task.id[:8]}.*succeeded.*already ended"):
        store.cancel(task.id)


def test_cancel_cascades_over_children_and_their_children(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    # Given a queued parent with a queued child, a grandchild and a running child,
    store.set_setting("max_concurrent", 1)
    parent = submit("parent")
    child = submit("child", parent_id=parent.id)
    submit("grandchild", parent_id=child.id)
    running_child = submit("running-child", parent_id=parent.id, priority="urgent")
    submit("other")
    (running,) = claim()
    assert running.task.id == running_child.id

    store.cancel(parent.id, cascade=True)

    # then every descendant not running is cancelled, and the running one asked to stop.
    statuses = {t.title: t.status for t in store.list_tasks()}
    assert statuses == {
        "parent": Status.CANCELLED,
        "child": Status.CANCELLED,
        "grandchild": Status.CANCELLED,
        "running-child": Status.RUNNING,
        "other": Status.QUEUED,
    }
    assert [k.task_id for k in store.kill_requests(NODE)] == [running_child.id]
    # Once its process is gone, the running child is cancelled too (not failed, though
    # it died of the signal), and its slot goes to the one task outside the family.
    assert finish(running, exit_code=-15).status is Status.CANCELLED
    assert titles(claim()) == ["other"]


def test_cancel_without_cascade_leaves_children_alone(store: Store, submit: SubmitFn) -> None:
    parent = submit("parent")
    child = submit("child", parent_id=parent.id)

    store.cancel(parent.id)

    assert store.get(child.id).status is Status.QUEUED


# -- terminate ----------------------------------------------------------------------------


def test_terminate_fails_a_running_task_with_the_reason_and_no_retry(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a", max_attempts=3)
    (running,) = claim()

    requested = store.terminate(task.id, "stuck in a loop")

    assert requested.status is Status.RUNNING
    (kill,) = store.kill_requests(NODE)
    assert kill.request.kind is StopKind.TERMINATE
    ended = finish(running, exit_code=-15)
    assert ended.status is Status.FAILED
    assert ended.failure_reason == "terminated: stuck in a loop"
    assert store.get(task.id).attempts[-1].outcome == "terminated"
    assert claim() == []


def test_terminate_without_a_reason(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a")
    (running,) = claim()
    store.terminate(task.id, "  ")

    assert finish(running, exit_code=-9).failure_reason == "terminated: by request"


def test_terminate_applies_only_to_running_tasks(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a")
    with pytest.raises(InvalidTransition, match="use cancel"):
        store.terminate(task.id)
    finish(claim()[0])
    with pytest.raises(InvalidTransition, match="ended"):
        store.terminate(task.id)


# -- restart ------------------------------------------------------------------------------


def test_restart_of_a_succeeded_task_queues_a_new_attempt_at_the_tail_of_its_band(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, line: LineFn
) -> None:
    store.set_setting("max_concurrent", 1)
    task = submit("a")
    submit("b")
    submit("low", priority="low")
    submit("c")
    (first,) = claim()
    finish(first)

    restarted = store.restart(task.id)

    assert restarted.status is Status.QUEUED
    assert (restarted.exit_code, restarted.finished_at, restarted.boosted) == (None, None, False)
    assert line() == ["b", "c", "a", "low"]
    store.move(task.id, to=1)
    (second,) = claim()
    assert second.task.id == task.id
    assert second.attempt.number == 2
    assert [a.outcome for a in store.get(task.id).attempts] == ["succeeded", None]


@pytest.mark.parametrize("outcome", ["failed", "cancelled", "expired"])
def test_restart_of_an_ended_task(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock, outcome: str
) -> None:
    # Submitted 61 s ago with a queue TTL of 60 s (restart takes no clock: it is now).
    task = store.submit({"command": ["a"], "queue_ttl": 60}, now=clock.now - 61)
    if outcome == "failed":
        finish(store.claim(NODE, now=clock.now - 30).claims[0], exit_code=3)
    elif outcome == "cancelled":
        store.boost(task.id)
        store.cancel(task.id)
    else:
        claim()
    assert store.get(task.id).status == outcome

    restarted = store.restart(task.id)

    assert restarted.status is Status.QUEUED
    assert not restarted.boosted
    (claimed,) = claim()
    assert claimed.task.id == task.id


def test_restart_gives_a_failed_task_its_attempts_again(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    task = submit("a", max_attempts=2, backoff=1)
    finish(claim()[0], exit_code=1)
    clock.advance(10)
    assert finish(claim()[0], exit_code=1).status is Status.FAILED

    store.restart(task.id)

    assert finish(claim()[0], exit_code=1).status is Status.QUEUED
    clock.advance(10)
    assert finish(claim()[0], exit_code=1).status is Status.FAILED
    assert [a.number for a in store.get(task.id).attempts] == [1, 2, 3, 4]


def test_restart_of_a_running_task_needs_force(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    task = submit("a")
    claim()

    with pytest.raises(InvalidTransition, match=rf"{task.id[:8]}.*running.*--force"):
        store.restart(task.id)
    assert store.kill_requests(NODE) == []


def test_forced_restart_stops_the_run_then_queues_it_again(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, line: LineFn
) -> None:
    store.set_setting("max_concurrent", 1)
    task = submit("a")
    (first,) = claim()
    submit("b")

    # The run is asked to stop; until it has, it keeps its slot and is not started twice.
    assert store.restart(task.id, force=True).status is Status.RUNNING
    assert [(k.task_id, k.request) for k in store.kill_requests(NODE)] == [(task.id, RESTART)]
    store.set_setting("max_concurrent", 5)
    assert titles(claim()) == ["b"]

    requeued = finish(first, exit_code=-15)

    assert requeued.status is Status.QUEUED
    assert store.get(task.id).attempts[0].outcome == "restarted"
    assert line() == ["a"]
    (second,) = claim()
    assert second.attempt.number == 2
    live = [a for a in store.attempts() if a.task_id == task.id and a.finished_at is None]
    assert [a.id for a in live] == [second.attempt.id]


def test_a_forced_restart_after_the_dependency_failed_again_ends_blocked(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    # Given b running after its dependency a succeeded, and c waiting on b,
    a = submit("a")
    b = submit("b", depends_on=[a.id])
    c = submit("c", depends_on=[b.id])
    finish(claim()[0])
    (running,) = claim()
    assert running.task.id == b.id

    # when a is run again and fails, and b is restarted with force,
    store.restart(a.id)
    finish(claim()[0], exit_code=1)
    store.restart(b.id, force=True)
    ended = finish(running, exit_code=-15)

    # then b's run is over (its slot is free), and b is blocked by a, and c by b;
    assert ended.status is Status.BLOCKED
    assert a.id[:8] in (ended.status_reason or "")
    assert store.live_attempts(NODE) == []
    assert store.get(c.id).status is Status.BLOCKED
    # and restarting a puts both back to waiting.
    store.restart(a.id)
    assert store.get(b.id).status is Status.WAITING
    assert store.get(c.id).status is Status.WAITING


@pytest.mark.parametrize("status", ["queued", "waiting", "held"])
def test_restart_of_a_task_not_ended_is_refused(
    store: Store, submit: SubmitFn, status: str
) -> None:
    if status == "waiting":
        task = waiting_task(store, submit)
    elif status == "held":
        task = held_task(store, submit)
    else:
        task = queued_task(store, submit)

    with pytest.raises(InvalidTransition, match=rf"{task.id[:8]}.*{status}"):
        store.restart(task.id)
    with pytest.raises(InvalidTransition):
        store.restart(task.id, force=True)


# -- clear --------------------------------------------------------------------------------


def test_clear_cancels_every_task_not_started(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    # Given one running, one failed, and five tasks not started (two of them a chain
    # of waiting tasks, one blocked by the failed task),
    store.set_setting("max_concurrent", 1)
    failed = submit("failed", priority="urgent")
    finish(claim()[0], exit_code=1)
    submit("running", priority="urgent")
    claim()
    queued = submit("queued")
    store.hold(submit("held").id)
    first = submit("waits-on-queued", depends_on=[queued.id])
    submit("waits-on-waiting", depends_on=[first.id])
    submit("blocked", depends_on=[failed.id])

    assert store.clear() == 5

    statuses = {t.title: t.status for t in store.list_tasks()}
    assert statuses == {
        "failed": Status.FAILED,
        "running": Status.RUNNING,
        "queued": Status.CANCELLED,
        "held": Status.CANCELLED,
        "waits-on-queued": Status.CANCELLED,
        "waits-on-waiting": Status.CANCELLED,
        "blocked": Status.CANCELLED,
    }
    assert store.events()[-1].kind == "cleared"
    assert store.events()[-1].data["count"] == 5
    assert store.clear() == 0


def test_terminate_of_an_attempt_no_longer_current_changes_nothing(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    # Given a task whose first attempt failed and whose second runs (another node's),
    task = submit("agent", max_attempts=2)
    (first,) = claim()
    finish(first, 1)
    clock.advance(3600)
    (second,) = claim()
    # when a node asks to stop its own (first) attempt, then nothing is stopped,
    with pytest.raises(InvalidTransition, match="no longer current"):
        store.terminate(task.id, "stalled", attempt_id=first.attempt.id)
    assert store.get(task.id).kill_request is None
    # and the current attempt can be.
    stopped = store.terminate(task.id, "stalled", attempt_id=second.attempt.id)
    assert stopped.kill_request is not None
