"""Submitting: validation, priorities, bounds. A refused submit creates nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from slotline.errors import BoundExceeded, InvalidInput, NotFound, UnknownDependency
from slotline.models import Priority, Status
from slotline.store import Store

from .conftest import ClaimFn, SubmitFn

MISSING = "f" * 32


def assert_nothing_created(store: Store, tasks_before: int, seq_before: int) -> None:
    assert len(store.list_tasks()) == tasks_before
    assert store.last_seq() == seq_before


def test_submit_returns_a_queued_task_at_the_tail(store: Store, submit: SubmitFn) -> None:
    first = submit("first")
    second = submit("second", agent="claude", workspace="/repo", user="ann")

    assert second.status is Status.QUEUED
    assert second.priority is Priority.NORMAL
    assert second.command == ("echo", "second")
    assert (second.agent, second.workspace, second.user) == ("claude", "/repo", "ann")
    assert second.attempts == ()
    assert store.get(first.id).position == 1
    assert store.get(second.id).position == 2


@pytest.mark.parametrize(
    "spec",
    [
        {"command": []},
        {"command": [""]},
        {"command": ["", "arg"]},
        {},
        {"command": ["echo"], "callable": "pkg.fn"},
        {"command": ["echo", "a\x00b"]},
        {"command": ["echo"], "max_attempts": 0},
        {"command": ["echo"], "queue_ttl": 0},
        {"command": ["echo"], "agent": "has space"},
        {"command": ["echo"], "no_such_field": 1},
    ],
    ids=[
        "empty",
        "empty-program",
        "empty-program-with-args",
        "no-command",
        "command-and-callable",
        "nul-byte",
        "zero-attempts",
        "zero-ttl",
        "bad-agent-name",
        "unknown-field",
    ],
)
def test_invalid_spec_is_refused_and_nothing_is_created(
    store: Store, submit: SubmitFn, spec: dict[str, Any]
) -> None:
    submit("existing")
    before = (len(store.list_tasks()), store.last_seq())

    with pytest.raises(InvalidInput) as raised:
        store.submit(spec)

    assert str(raised.value)
    assert_nothing_created(store, *before)


@pytest.mark.parametrize("priority", ["P4", "highest", "", 4, -1, True])
def test_bad_priority_is_refused_and_nothing_is_created(store: Store, priority: object) -> None:
    with pytest.raises(InvalidInput, match="priority"):
        store.submit({"command": ["echo"], "priority": priority})

    assert_nothing_created(store, 0, 0)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("P0", Priority.URGENT),
        ("p1", Priority.HIGH),
        ("P2", Priority.NORMAL),
        ("P3", Priority.LOW),
        ("medium", Priority.NORMAL),
        ("Urgent", Priority.URGENT),
        ("low", Priority.LOW),
        (1, Priority.HIGH),
    ],
)
def test_priority_aliases(submit: SubmitFn, given: object, expected: Priority) -> None:
    assert submit(priority=given).priority is expected


def test_unknown_dependency_creates_nothing(store: Store, submit: SubmitFn) -> None:
    known = submit("known")
    before = (len(store.list_tasks()), store.last_seq())

    with pytest.raises(UnknownDependency, match=MISSING):
        submit("dependent", depends_on=[known.id, MISSING])

    assert_nothing_created(store, *before)


def test_a_batch_with_one_bad_task_creates_none(store: Store, submit: SubmitFn) -> None:
    known = submit("known")
    before = (len(store.list_tasks()), store.last_seq())

    with pytest.raises(UnknownDependency):
        store.submit_many(
            [{"command": ["echo", "ok"]}, {"command": ["echo"], "depends_on": [MISSING]}]
        )

    assert_nothing_created(store, *before)
    assert store.submit_many([{"command": ["a"]}, {"command": ["b"], "depends_on": [known.id]}])


def test_dependency_prefix_is_resolved_to_the_full_id(submit: SubmitFn) -> None:
    dep = submit("dep")

    dependent = submit("dependent", depends_on=[dep.id[:12], dep.id])

    assert dependent.depends_on == (dep.id,)
    assert dependent.status is Status.WAITING


def test_unknown_parent_creates_nothing(store: Store) -> None:
    with pytest.raises(NotFound):
        store.submit({"command": ["echo"], "parent_id": MISSING})

    assert_nothing_created(store, 0, 0)


def test_max_queue_size_counts_tasks_not_yet_started(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_queue_size", 2)
    store.set_setting("max_concurrent", 1)
    submit("a")
    submit("b")
    before = (len(store.list_tasks()), store.last_seq())

    with pytest.raises(BoundExceeded, match="max_queue_size") as raised:
        submit("c")
    assert raised.value.details["limit"] == "max_queue_size"
    assert_nothing_created(store, *before)
    with pytest.raises(BoundExceeded):
        store.submit_many([{"command": ["x"]}])

    # When one starts, it no longer waits, so there is room for one more.
    assert len(claim()) == 1
    assert submit("c").status is Status.QUEUED


def test_max_depth_bounds_nesting(store: Store, submit: SubmitFn) -> None:
    store.set_setting("max_depth", 1)
    root = submit("root")
    child = submit("child", parent_id=root.id)
    assert (root.depth, child.depth, child.parent_id) == (0, 1, root.id)
    before = (len(store.list_tasks()), store.last_seq())

    with pytest.raises(BoundExceeded, match="max_depth"):
        submit("grandchild", parent_id=child.id)

    assert_nothing_created(store, *before)


def test_max_children_counts_active_children(store: Store, submit: SubmitFn) -> None:
    store.set_setting("max_children", 2)
    parent = submit("parent")
    first = submit("one", parent_id=parent.id)
    submit("two", parent_id=parent.id)
    before = (len(store.list_tasks()), store.last_seq())

    with pytest.raises(BoundExceeded, match="max_children"):
        submit("three", parent_id=parent.id)
    assert_nothing_created(store, *before)

    store.cancel(first.id)
    assert submit("three", parent_id=parent.id).parent_id == parent.id


def test_max_queued_per_user_bounds_each_user_alone(store: Store, submit: SubmitFn) -> None:
    store.set_setting("max_queued_per_user", 2)
    submit("a1", user="ann", expected_duration=10)
    submit("a2", user="ann")
    submit("b1", user="bob")
    before = (len(store.list_tasks()), store.last_seq())

    with pytest.raises(BoundExceeded, match="'ann' has 2 tasks waiting") as refused:
        submit("a3", user="ann")
    assert refused.value.details["limit"] == "max_queued_per_user"
    # Room when ann's first task starts (now: nothing runs ahead of it).
    assert refused.value.details["retry_after"] == 0
    assert_nothing_created(store, *before)
    with pytest.raises(BoundExceeded):  # a batch counts as a whole
        store.submit_many([{"command": ["true"], "user": "bob"}] * 2)
    assert submit("b2", user="bob").user == "bob"  # others are not held back by ann
    assert submit("nobody").user is None
    store.set_setting("max_queued_per_user", None)
    assert submit("a3", user="ann").user == "ann"


def test_a_refused_submit_says_when_to_retry(store: Store, submit: SubmitFn) -> None:
    store.set_setting("max_children", 1)
    parent = submit("parent")
    submit("child", parent_id=parent.id, expected_duration=100)
    # Room for another child when the child is estimated to end: it starts now, runs 100 s.
    with pytest.raises(BoundExceeded) as refused:
        submit("second", parent_id=parent.id)
    assert 90 < refused.value.details["retry_after"] <= 100
    assert refused.value.details["parent_id"] == parent.id
    # A full queue frees a place when the next task in line starts: now, here.
    store.set_setting("max_queue_size", 2)
    with pytest.raises(BoundExceeded) as full:
        submit("third")
    assert full.value.details["retry_after"] == 0


def test_submit_held_keeps_the_task_out_of_the_line(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    held = submit("held", hold=True)

    assert held.status is Status.HELD
    assert store.get(held.id).position is None
    assert claim() == []


def test_submit_returns_each_task_as_a_read_of_it_does(store: Store, submit: SubmitFn) -> None:
    """The tasks a batch returns are built from what it wrote, not read back: they must
    equal a read in every field, JSON round trip included (tuples become lists)."""
    parent = submit("parent")
    dep = submit("dep")
    made = store.submit_many(
        [
            {"command": ["echo", "a b"], "agent": "claude", "workspace": "/repo", "user": "ann"},
            {
                "callable": "mod.fn",
                "args": {"n": 1, "nested": {"list": (1, 2.5, None)}, "flag": True},
                "labels": {"team": "core"},
                "env": {"A": "1"},
                "priority": "high",
                "timeout": 30,
                "queue_ttl": 600,
                "max_attempts": 3,
                "backoff": 2,
                "memory_mb": 512,
                "expected_duration": 12.5,
                "title": "with a title",
            },
            {"command": ["true"], "depends_on": [dep.id[:10]], "hold": True},
            {"command": ["true"], "parent_id": parent.id},
            {"command": ["true"], "hold": True},
        ]
    )
    for task in made:
        assert replace(store.get(task.id, estimate=False), position=None) == task
    assert made[2].status is Status.WAITING
    assert made[2].hold_when_ready
    assert made[3].depth == 1


def test_a_batch_counts_its_own_children_against_max_children(
    store: Store, submit: SubmitFn
) -> None:
    parent = submit("parent")
    store.set_setting("max_children", 2)
    seq = store.last_seq()
    with pytest.raises(BoundExceeded) as refused:
        store.submit_many([{"command": ["true"], "parent_id": parent.id}] * 3)
    assert refused.value.details["limit"] == "max_children"
    assert_nothing_created(store, 1, seq)


def test_the_counts_follow_every_change_of_status(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    """`status` with a limit and `counts` read the per-status counts the triggers keep."""
    store.set_setting("max_concurrent", 1)
    tasks = [submit(f"t{i}") for i in range(5)]
    store.hold(tasks[1].id)
    store.cancel(tasks[2].id)
    assert len(claim()) == 1
    assert store.counts() == {"queued": 2, "held": 1, "cancelled": 1, "running": 1}
    assert store.status(limit=1).queued_total == 2
    store.restart(tasks[2].id)
    assert store.status(limit=1).queued_total == 3
