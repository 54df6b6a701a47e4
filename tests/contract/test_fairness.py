"""Fair dispatch: each user's next task takes turns within a priority level; positions,
claims and ETAs follow the fair order, and the turns persist in the store."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput
from slotline.store import Store

from .conftest import ClaimFn, Clock, FinishFn, LineFn, SubmitFn


def test_positions_and_claims_take_turns_between_users(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, line: LineFn, clock: Clock
) -> None:
    # Given: alice queued three tasks before bob and carol queued theirs
    store.set_setting("max_concurrent", 1)
    store.set_fairness("user")
    took = {"expected_duration": 60}  # (a run time is known: the ETAs are)
    for name in ("a1", "a2", "a3"):
        submit(name, user="alice", **took)
    submit("b1", user="bob", **took)
    submit("c1", user="carol", **took)
    submit("urgent-a4", user="alice", priority="urgent", **took)

    # Then: the line is in fair order within each priority level, urgent first
    assert line() == ["urgent-a4", "a1", "b1", "c1", "a2", "a3"]
    by_title = {t.title: t for t in store.list_tasks()}
    assert store.get(by_title["c1"].id).position == 4
    etas = [t.eta_start for t in store.status(now=clock.now).queued]
    assert all(e is not None for e in etas)
    assert etas == sorted(etas)  # type: ignore[type-var]

    # When: the tasks run one at a time, the claims follow that order
    started = []
    for _ in range(6):
        (one,) = claim()
        started.append(one.task.title)
        finish(one)
    # alice's urgent start was her turn: bob and carol go before her next one.
    assert started == ["urgent-a4", "b1", "c1", "a1", "a2", "a3"]


def test_turns_are_remembered_across_claims_and_weights_give_more_turns(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, line: LineFn
) -> None:
    store.set_setting("max_concurrent", 1)
    store.set_fairness("user", {"alice": 2})
    for n in range(4):
        submit(f"a{n}", user="alice")
    for n in range(4):
        submit(f"b{n}", user="bob")

    started = []
    for _ in range(6):
        (one,) = claim()
        started.append(one.task.title)
        finish(one)

    assert started == ["a0", "b0", "a1", "a2", "b1", "a3"]
    assert line() == ["b2", "b3"]


def test_turning_fairness_off_returns_to_rank_order(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    store.set_fairness("workspace")
    submit("w1-a", workspace="/w1")
    submit("w1-b", workspace="/w1")
    submit("w2-a", workspace="/w2")
    assert line() == ["w1-a", "w2-a", "w1-b"]

    store.set_fairness(None)

    assert line() == ["w1-a", "w1-b", "w2-a"]
    assert store.settings()["fairness"] is None


def test_fairness_by_parent_task_takes_turns_between_subtrees(
    store: Store, submit: SubmitFn, claim: ClaimFn, line: LineFn
) -> None:
    store.set_setting("max_concurrent", 2)
    store.set_fairness("parent")
    p1 = submit("p1")
    p2 = submit("p2")
    (first, second) = claim()
    submit("p1-x", parent_id=p1.id)
    submit("p1-y", parent_id=p1.id)
    submit("p2-x", parent_id=p2.id)

    assert {first.task.id, second.task.id} == {p1.id, p2.id}
    assert line() == ["p1-x", "p2-x", "p1-y"]


def test_bad_fairness_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput, match="unknown fairness key"):
        store.set_fairness("colour")
    with pytest.raises(InvalidInput, match="more than 0"):
        store.set_fairness("user", {"alice": -1})
    assert store.settings()["fairness"] is None
