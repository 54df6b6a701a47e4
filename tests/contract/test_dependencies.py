"""Dependencies: waiting, becoming ready, blocking (transitively), restarts, cycles."""

from __future__ import annotations

import pytest

from slotline.errors import DependencyCycle, InvalidTransition, UnknownDependency
from slotline.models import Status
from slotline.store import Store

from .conftest import ClaimFn, Clock, FinishFn, SubmitFn, titles


def statuses(store: Store) -> dict[str, Status]:
    return {t.title: t.status for t in store.list_tasks()}


def test_a_dependent_waits_without_a_slot_or_position_until_all_deps_succeed(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    store.set_setting("max_concurrent", 1)
    first = submit("first")
    second = submit("second")
    dependent = submit("dependent", depends_on=[first.id, second.id], priority="urgent")

    assert dependent.status is Status.WAITING
    assert store.get(dependent.id).position is None
    (a,) = claim()
    assert a.task.id == first.id
    finish(a)
    assert store.get(dependent.id).status is Status.WAITING

    (b,) = claim()
    finish(b)

    ready = store.get(dependent.id)
    assert ready.status is Status.QUEUED
    assert ready.position == 1
    assert titles(claim()) == ["dependent"]


def test_a_dependency_already_succeeded_does_not_wait(
    submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    done = submit("done")
    finish(claim()[0])

    assert submit("dependent", depends_on=[done.id]).status is Status.QUEUED


@pytest.mark.parametrize("ending", ["failed", "cancelled", "expired"])
def test_a_bad_end_blocks_dependents_transitively_naming_the_dependency(
    store: Store,
    submit: SubmitFn,
    claim: ClaimFn,
    finish: FinishFn,
    clock: Clock,
    ending: str,
) -> None:
    # Given a chain a <- b <- c, and d depending on a and on a task that succeeded,
    a = submit("a", queue_ttl=60)
    ok = submit("ok")
    b = submit("b", depends_on=[a.id])
    c = submit("c", depends_on=[b.id])
    d = submit("d", depends_on=[a.id, ok.id])
    store.set_setting("max_concurrent", 1)
    store.set_priority(ok.id, "urgent")
    finish(claim()[0])

    # when a ends badly,
    if ending == "failed":
        finish(claim()[0], exit_code=2)
    elif ending == "cancelled":
        store.cancel(a.id)
    else:
        store.set_setting("max_concurrent", 0)
        clock.advance(61)
        claim()

    # then b and d are blocked by a, and c by b.
    assert statuses(store) == {
        "a": ending,
        "ok": Status.SUCCEEDED,
        "b": Status.BLOCKED,
        "c": Status.BLOCKED,
        "d": Status.BLOCKED,
    }
    assert a.id[:8] in (store.get(b.id).status_reason or "")
    assert ending in (store.get(b.id).status_reason or "")
    assert b.id[:8] in (store.get(c.id).status_reason or "")
    assert a.id[:8] in (store.get(d.id).status_reason or "")


def test_a_task_submitted_on_a_failed_dependency_is_blocked_at_once(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    failed = submit("failed")
    finish(claim()[0], exit_code=1)

    dependent = submit("dependent", depends_on=[failed.id])

    assert dependent.status is Status.BLOCKED
    assert failed.id[:8] in (dependent.status_reason or "")


def test_restarting_the_failed_dependency_puts_dependents_back_to_waiting(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    a = submit("a")
    b = submit("b", depends_on=[a.id])
    submit("c", depends_on=[b.id])
    finish(claim()[0], exit_code=1)

    store.restart(a.id)

    assert statuses(store) == {"a": Status.QUEUED, "b": Status.WAITING, "c": Status.WAITING}
    assert store.get(b.id).status_reason is None
    finish(claim()[0])
    assert titles(claim()) == ["b"]


def test_a_blocked_task_cannot_be_restarted_before_its_dependency(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    a = submit("a")
    b = submit("b", depends_on=[a.id])
    finish(claim()[0], exit_code=1)

    with pytest.raises(InvalidTransition, match=rf"{b.id[:8]}.*{a.id[:8]}.*failed"):
        store.restart(b.id)

    assert store.get(b.id).status is Status.BLOCKED


def test_a_task_blocked_by_two_dependencies_waits_again_once_both_are_restarted(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    a = submit("a")
    b = submit("b")
    dependent = submit("dependent", depends_on=[a.id, b.id])
    first, second = claim()
    finish(first, exit_code=1)
    finish(second, exit_code=1)

    store.restart(a.id)
    assert store.get(dependent.id).status is Status.BLOCKED
    store.restart(b.id)
    assert store.get(dependent.id).status is Status.WAITING


def test_cancelling_a_dependent_leaves_its_dependency_alone(store: Store, submit: SubmitFn) -> None:
    a = submit("a")
    b = submit("b", depends_on=[a.id])

    store.cancel(b.id)

    assert statuses(store) == {"a": Status.QUEUED, "b": Status.CANCELLED}


def test_add_dependency_to_a_queued_task_makes_it_wait(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    store.set_setting("max_concurrent", 1)
    a = submit("a")
    b = submit("b")
    (running,) = claim()

    waiting = store.add_dependency(b.id, a.id)

    assert waiting.status is Status.WAITING
    assert waiting.depends_on == (a.id,)
    assert claim() == []
    finish(running)
    assert titles(claim()) == ["b"]


def test_add_dependency_on_a_failed_task_blocks_the_task_and_its_dependents(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    # Given a queued task with a dependent, and a task waiting on something else,
    failed = submit("failed")
    finish(claim()[0], exit_code=1)
    store.set_setting("max_concurrent", 0)
    queued = submit("queued")
    dependent = submit("dependent", depends_on=[queued.id])
    waiting = submit("waiting", depends_on=[submit("other").id])

    # when each gets a dependency that failed,
    blocked = store.add_dependency(queued.id, failed.id)
    also_blocked = store.add_dependency(waiting.id, failed.id)

    # then both are blocked by it (a waiting one would otherwise wait forever),
    # and so is the task that depends on the first.
    assert (blocked.status, also_blocked.status) == (Status.BLOCKED, Status.BLOCKED)
    assert failed.id[:8] in (blocked.status_reason or "")
    assert failed.id[:8] in (also_blocked.status_reason or "")
    assert store.get(dependent.id).status is Status.BLOCKED
    assert queued.id[:8] in (store.get(dependent.id).status_reason or "")


def test_add_dependency_refuses_ended_or_running_tasks_and_unknown_ids(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    running = submit("running")
    claim()
    other = submit("other")

    with pytest.raises(InvalidTransition, match="running; only a waiting or queued task"):
        store.add_dependency(running.id, other.id)
    with pytest.raises(UnknownDependency):
        store.add_dependency(other.id, "f" * 32)


@pytest.mark.parametrize("length", [1, 2, 3, 5])
def test_add_dependency_refuses_a_cycle_of_any_length(
    store: Store, submit: SubmitFn, length: int
) -> None:
    # Given a chain t0 <- t1 <- ... <- t(n-1), when t0 is made to depend on the last,
    chain = [submit("t0")]
    for i in range(1, length):
        chain.append(submit(f"t{i}", depends_on=[chain[-1].id]))
    seq = store.last_seq()

    with pytest.raises(DependencyCycle, match=chain[0].id[:8]):
        store.add_dependency(chain[0].id, chain[-1].id)

    # then nothing changed.
    assert store.get(chain[0].id).depends_on == ()
    assert store.get(chain[0].id).status is Status.QUEUED
    assert store.last_seq() == seq


def test_add_dependency_accepts_a_diamond(store: Store, submit: SubmitFn) -> None:
    top = submit("top")
    left = submit("left", depends_on=[top.id])
    right = submit("right", depends_on=[top.id])
    bottom = submit("bottom", depends_on=[left.id])

    assert store.add_dependency(bottom.id, right.id).depends_on == (left.id, right.id)


def test_a_task_submitted_held_stays_held_once_its_dependencies_succeed(store: Store) -> None:
    first = store.submit({"command": ["first"]})
    later = store.submit({"command": ["later"], "depends_on": [first.id], "hold": True})
    assert store.get(later.id).status is Status.WAITING
    (claim,) = store.claim("n").claims
    store.finish(claim.attempt.id, claim.attempt.token, 0)
    assert store.get(later.id).status is Status.HELD
    assert store.claim("n").claims == []
    store.release(later.id)
    assert [c.task.id for c in store.claim("n").claims] == [later.id]
