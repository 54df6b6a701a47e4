"""Steering the line: boost, bump, move, set_priority, hold and release."""

from __future__ import annotations

import random

import pytest

from slotline.errors import AccessDenied, InvalidInput, InvalidTransition
from slotline.models import Priority, Status
from slotline.store import Store

from .conftest import ClaimFn, FinishFn, LineFn, SubmitFn, titles


def rows_except(store: Store, task_id: str) -> dict[str, tuple[str, Priority, bool, Status]]:
    """What places every other task in line: nothing a move does may change these."""
    return {
        t.id: (t.rank, t.priority, t.boosted, t.status)
        for t in store.list_tasks()
        if t.id != task_id
    }


# -- boost ("start next") -----------------------------------------------------------------


def test_boost_puts_a_task_at_position_one(store: Store, submit: SubmitFn, line: LineFn) -> None:
    submit("urgent", priority="urgent")
    submit("a")
    low = submit("low", priority="low")

    boosted = store.boost(low.id)

    assert boosted.boosted
    assert store.get(low.id).position == 1
    assert line() == ["low", "urgent", "a"]


def test_the_latest_boost_of_a_band_goes_first(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    submit("a")
    b = submit("b")
    c = submit("c")

    store.boost(b.id)
    store.boost(c.id)

    assert line() == ["c", "b", "a"]


def test_boost_does_not_bypass_limits(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    store.set_setting("max_concurrent", 1)
    submit("a")
    submit("b")
    c = submit("c")
    (running,) = claim()

    store.boost(c.id)

    assert claim() == []
    finish(running)
    assert titles(claim()) == ["c"]


def test_boost_of_a_held_task_takes_effect_when_released(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    submit("a")
    b = submit("b")
    store.hold(b.id)

    store.boost(b.id)
    assert line() == ["a"]
    store.release(b.id)

    assert line() == ["b", "a"]


def test_boost_of_a_running_task_is_refused(store: Store, submit: SubmitFn, claim: ClaimFn) -> None:
    task = submit("a")
    claim()

    with pytest.raises(InvalidTransition, match="already running"):
        store.boost(task.id)


# -- bump ("start now") -------------------------------------------------------------------


def test_bump_starts_a_task_over_the_limit_and_then_nothing_else_starts(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    # Given a full pool of one slot and two tasks in line,
    store.set_setting("max_concurrent", 1)
    submit("a")
    submit("b")
    c = submit("c")
    (a,) = claim()

    # when the last one is bumped, it starts at once, marked over the limit;
    bumped = store.bump(c.id)
    assert bumped.status is Status.QUEUED
    (started,) = claim()
    assert started.task.title == "c"
    assert started.attempt.over_limit
    status = store.status()
    assert status.over_limit
    assert status.active == 2

    # then nothing else starts until the running count is back under the limit.
    finish(a)
    assert claim() == []
    assert store.status().active == 1
    finish(started)
    assert not store.status().over_limit
    assert titles(claim()) == ["b"]


def test_bump_over_a_per_key_limit_is_over_limit(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_limit("agent", "claude", 1)
    submit("c1", agent="claude")
    c2 = submit("c2", agent="claude")
    submit("c3", agent="claude")
    claim()

    store.bump(c2.id)
    (started,) = claim()

    assert started.task.id == c2.id
    assert started.attempt.over_limit
    assert claim() == []


def test_bump_with_a_free_slot_is_not_over_limit(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    submit("a")
    b = submit("b")

    store.bump(b.id)

    assert [(c.task.title, c.attempt.over_limit) for c in claim()] == [
        ("b", False),
        ("a", False),
    ]


def test_a_bump_with_an_allowance_starts_over_the_limit_only_within_it(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # Given ann's one slot taken, and two more of hers and one of bob's in line
    store.set_setting("max_concurrent", 1)
    submit("a", user="ann")
    b = submit("b", user="ann")
    c = submit("c", user="ann")
    d = submit("d", user="bob")
    claim()

    # When ann may have one run over the limit, her first bump passes, her second not
    store.bump(b.id, allowance=1)
    with pytest.raises(AccessDenied, match=r"users\.start_now: 1; user 'ann' has 1"):
        store.bump(c.id, allowance=1)
    (started,) = claim()
    assert (started.task.id, started.attempt.over_limit) == (b.id, True)
    # (running over it counts as well), while bob's allowance is his own
    with pytest.raises(AccessDenied):
        store.bump(c.id, allowance=1)
    with pytest.raises(AccessDenied, match=r"users\.start_now: 0"):
        store.bump(d.id, allowance=0)
    assert store.bump(d.id, allowance=1).start_now
    assert not store.get(c.id).start_now


def test_bump_starts_even_a_held_task_while_paused(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    task = submit("a")
    store.hold(task.id)
    store.pause()

    assert store.bump(task.id).status is Status.QUEUED

    assert titles(claim()) == ["a"]


def test_bump_of_a_running_or_ended_task_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    task = submit("a")
    (running,) = claim()

    with pytest.raises(InvalidTransition, match="already running"):
        store.bump(task.id)
    finish(running)
    with pytest.raises(InvalidTransition, match="succeeded"):
        store.bump(task.id)


# -- move ---------------------------------------------------------------------------------


def test_move_to_a_position(store: Store, submit: SubmitFn, line: LineFn) -> None:
    for name in "abcd":
        submit(name)
    e = submit("e")
    before = rows_except(store, e.id)

    store.move(e.id, to=2)

    assert line() == ["a", "e", "b", "c", "d"]
    assert store.get(e.id).position == 2
    assert rows_except(store, e.id) == before


def test_move_to_the_head_and_past_the_tail(store: Store, submit: SubmitFn, line: LineFn) -> None:
    a, _, c = submit("a"), submit("b"), submit("c")

    store.move(c.id, to=1)
    assert line() == ["c", "a", "b"]
    store.move(a.id, to=99)
    assert line() == ["c", "b", "a"]


def test_move_before_and_after(store: Store, submit: SubmitFn, line: LineFn) -> None:
    a, b, c, d = (submit(name) for name in "abcd")
    before = rows_except(store, a.id)

    store.move(a.id, after=c.id)
    assert line() == ["b", "c", "a", "d"]
    assert rows_except(store, a.id) == before

    before = rows_except(store, d.id)
    store.move(d.id, before=b.id[:10])
    assert line() == ["d", "b", "c", "a"]
    assert rows_except(store, d.id) == before


def test_a_moved_task_takes_the_band_of_its_new_neighbours(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    urgent = submit("urgent", priority="urgent")
    submit("normal")
    low = submit("low", priority="low")
    others = rows_except(store, low.id)

    moved = store.move(low.id, before=urgent.id)

    assert moved.priority is Priority.URGENT
    assert line() == ["low", "urgent", "normal"]
    assert rows_except(store, low.id) == others

    store.move(low.id, to=3)
    assert store.get(low.id).priority is Priority.NORMAL
    assert line() == ["urgent", "normal", "low"]


def test_many_moves_place_every_task_exactly_where_asked(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    # Given a line of mixed priorities and a boost, when tasks are moved at random,
    # then the line always equals the same moves applied to a plain list.
    rng = random.Random(7)
    priorities = ["urgent", "high", "normal", "low"]
    ids = {}
    for i in range(8):
        ids[f"t{i}"] = submit(f"t{i}", priority=rng.choice(priorities)).id
    store.boost(ids["t5"])
    expected = line()
    for _ in range(40):
        name = rng.choice(expected)
        expected.remove(name)
        how = rng.choice(["to", "before", "after"])
        if how == "to":
            position = rng.randint(1, len(expected) + 2)
            store.move(ids[name], to=position)
            expected.insert(min(position, len(expected) + 1) - 1, name)
        else:
            other = rng.choice(expected)
            index = expected.index(other) + (how == "after")
            store.move(ids[name], **{how: ids[other]})
            expected.insert(index, name)
        assert line() == expected


def test_a_released_task_and_one_moved_into_its_place_both_keep_a_place(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    # Given b is held, and d is moved into the gap b left,
    a, b, _, d = (submit(name) for name in "abcd")
    store.hold(b.id)
    store.move(d.id, after=a.id)
    store.release(b.id)
    order = line()
    assert sorted(order) == ["a", "b", "c", "d"]
    assert order[0] == "a"
    assert order[3] == "c"

    # then a task can be moved right after either of them.
    e = submit("e")
    for name, task in (("b", b), ("d", d)):
        store.move(e.id, after=task.id)
        assert line()[line().index(name) + 1] == "e"
    assert line().count("e") == 1


@pytest.mark.parametrize(
    "where",
    [{}, {"to": 1, "before": "ab"}, {"to": 0}, {"to": -2}],
    ids=["none", "two", "zero", "negative"],
)
def test_move_needs_exactly_one_valid_target(
    store: Store, submit: SubmitFn, where: dict[str, object]
) -> None:
    task = submit("a")
    submit("b")

    with pytest.raises(InvalidInput):
        store.move(task.id, **where)  # type: ignore[arg-type]


def test_move_relative_to_itself_or_a_task_not_queued_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 1)
    running = submit("running")
    claim()
    task = submit("a")
    held = submit("held")
    store.hold(held.id)

    with pytest.raises(InvalidInput, match="itself"):
        store.move(task.id, before=task.id)
    with pytest.raises(InvalidInput, match="running"):
        store.move(task.id, before=running.id)
    with pytest.raises(InvalidInput, match="held"):
        store.move(task.id, after=held.id)


def test_move_of_a_held_or_running_task_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    running = submit("running")
    claim()
    held = submit("held")
    store.hold(held.id)
    submit("other")

    with pytest.raises(InvalidTransition, match="release it first"):
        store.move(held.id, to=1)
    with pytest.raises(InvalidTransition, match="already running"):
        store.move(running.id, to=1)


# -- priority -----------------------------------------------------------------------------


def test_set_priority_moves_a_task_to_its_new_band(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    submit("a")
    b = submit("b")
    c = submit("c")

    assert store.set_priority(c.id, "P0").priority is Priority.URGENT
    assert line() == ["c", "a", "b"]
    store.set_priority(b.id, "low")
    assert line() == ["c", "a", "b"]
    store.set_priority(c.id, "medium")
    assert line() == ["a", "c", "b"]


def test_set_priority_applies_to_tasks_not_yet_started(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 1)
    running = submit("running")
    claim()
    waiting = submit("waiting", depends_on=[running.id])
    held = submit("held")
    store.hold(held.id)

    assert store.set_priority(waiting.id, "high").priority is Priority.HIGH
    assert store.set_priority(held.id, 0).priority is Priority.URGENT
    with pytest.raises(InvalidTransition, match="running"):
        store.set_priority(running.id, "high")
    with pytest.raises(InvalidInput, match="priority"):
        store.set_priority(held.id, "P9")


# -- hold and release ---------------------------------------------------------------------


def test_a_held_task_is_skipped_and_keeps_its_place_when_released(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, line: LineFn
) -> None:
    store.set_setting("max_concurrent", 1)
    submit("a")
    b = submit("b")
    submit("c")

    held = store.hold(b.id)
    assert held.status is Status.HELD
    assert store.get(b.id).position is None
    assert line() == ["a", "b", "c"][::2]
    (a,) = claim()
    submit("d")

    released = store.release(b.id)
    assert released.status is Status.QUEUED
    assert line() == ["b", "c", "d"]
    finish(a)
    assert titles(claim()) == ["b"]


def test_hold_and_release_apply_only_to_queued_and_held_tasks(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    running = submit("running")
    claim()
    queued = submit("queued")

    with pytest.raises(InvalidTransition, match="terminate or cancel"):
        store.hold(running.id)
    with pytest.raises(InvalidTransition, match="not held"):
        store.release(queued.id)
    store.hold(queued.id)
    with pytest.raises(InvalidTransition, match="held"):
        store.hold(queued.id)


def test_hold_drops_a_pending_start_now(store: Store) -> None:
    store.set_setting("max_concurrent", 1)
    store.submit({"command": ["first"]})
    store.claim("n")
    bumped = store.submit({"command": ["second"]})
    store.bump(bumped.id)
    store.hold(bumped.id)
    store.release(bumped.id)
    # Released, it waits for a free slot like any other task: no longer "start now".
    assert store.claim("n").claims == []


def test_the_position_of_one_task_matches_the_whole_queue(store: Store) -> None:
    # Given a line shaped by priorities, boosts and moves,
    rng = random.Random(7)
    tasks = [
        store.submit({"command": [f"t{i}"], "priority": rng.choice(["low", "normal", "high"])})
        for i in range(12)
    ]
    store.boost(tasks[5].id)
    store.boost(tasks[9].id)
    store.move(tasks[0].id, to=3)
    store.move(tasks[11].id, before=tasks[2].id)
    store.set_priority(tasks[4].id, "urgent")
    # then each task's own position is its place in the queue.
    for position, queued in enumerate(store.status().queued, 1):
        assert store.get(queued.id).position == position
