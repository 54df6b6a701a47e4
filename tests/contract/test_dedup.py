"""Idempotency keys: while a task of an owner with key K has not finished, that owner's
submit of K again returns it, on every backend, in batches, and under concurrent submits;
another owner's K is another task."""

from __future__ import annotations

import threading

import pytest

from slotline.errors import BoundExceeded, InvalidInput, InvalidTransition
from slotline.models import Status
from slotline.store import Store, open_store

from .conftest import ClaimFn, Clock, FinishFn, SubmitFn


def test_a_second_submit_with_the_key_returns_the_first_task(
    store: Store, submit: SubmitFn
) -> None:
    first = submit("worker", key="fix-issue-7")

    again = submit("worker again", key="fix-issue-7")

    assert first.deduplicated is False
    assert again.deduplicated is True
    assert again.id == first.id
    assert again.title == "worker"  # the existing task, not the new spec
    assert [t.id for t in store.list_tasks()] == [first.id]
    assert store.get(first.id).key == "fix-issue-7"


def test_the_existing_task_is_returned_while_it_runs_and_logged(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    first = submit("worker", key="k")
    claim()
    seq = store.last_seq()

    again = submit("worker", key="k")

    assert (again.id, again.status) == (first.id, Status.RUNNING)
    (event,) = store.events(since=seq)
    assert (event.kind, event.task_id, event.data["key"]) == ("deduplicated", first.id, "k")


def test_a_finished_task_frees_its_key(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    first = submit("worker", key="k")
    finish(claim()[0], 0)

    second = submit("worker", key="k")

    assert second.id != first.id
    assert not second.deduplicated


def test_a_dedup_window_returns_a_task_that_finished_within_it(
    submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    first = submit("worker", key="k")
    finish(claim()[0], 0)
    clock.advance(300)

    within = submit("worker", key="k", dedup_window=600)
    clock.advance(600)
    after = submit("worker", key="k", dedup_window=600)

    assert within.id == first.id
    assert within.deduplicated
    assert within.status is Status.SUCCEEDED
    assert after.id != first.id


def test_keys_are_respected_within_and_across_a_batch(store: Store, submit: SubmitFn) -> None:
    old = submit("old", key="a")

    batch = store.submit_many(
        [
            {"command": ["echo"], "title": "new b", "key": "b"},
            {"command": ["echo"], "title": "again a", "key": "a"},
            {"command": ["echo"], "title": "again b", "key": "b"},
            {"command": ["echo"], "title": "no key"},
        ]
    )

    assert [t.title for t in batch] == ["new b", "old", "new b", "no key"]
    assert [t.deduplicated for t in batch] == [False, True, True, False]
    assert batch[1].id == old.id
    assert batch[0].id == batch[2].id
    assert len(store.list_tasks()) == 3


def test_two_users_with_one_key_get_two_tasks_and_each_retry_its_own(
    store: Store, submit: SubmitFn
) -> None:
    ann = submit("ann's", key="fix-7", user="ann")
    seq = store.last_seq()

    bob = submit("bob's", key="fix-7", user="bob")
    nobody = submit("local", key="fix-7")
    ann_again = submit("ann's retry", key="fix-7", user="ann")
    bob_again = submit("bob's retry", key="fix-7", user="bob")
    nobody_again = submit("local retry", key="fix-7")

    assert len({ann.id, bob.id, nobody.id}) == 3
    assert (bob.deduplicated, nobody.deduplicated) == (False, False)
    assert (ann_again.id, ann_again.deduplicated) == (ann.id, True)
    assert (bob_again.id, bob_again.user) == (bob.id, "bob")
    assert nobody_again.id == nobody.id
    # Only the owner's own retries are logged on their tasks
    logged = [(e.task_id, e.kind) for e in store.events(since=seq) if e.kind == "deduplicated"]
    assert logged == [
        (ann.id, "deduplicated"),
        (bob.id, "deduplicated"),
        (nobody.id, "deduplicated"),
    ]


def test_a_batch_scopes_keys_per_owner(store: Store, submit: SubmitFn) -> None:
    bob = submit("bob's", key="a", user="bob")

    batch = store.submit_many(
        [
            {"command": ["echo"], "title": "ann a", "key": "a", "user": "ann"},
            {"command": ["echo"], "title": "bob a", "key": "a", "user": "bob"},
            {"command": ["echo"], "title": "ann a again", "key": "a", "user": "ann"},
        ]
    )

    assert [t.title for t in batch] == ["ann a", "bob's", "ann a"]
    assert [t.deduplicated for t in batch] == [False, True, True]
    assert batch[1].id == bob.id
    assert len(store.list_tasks()) == 2


def test_restarting_is_refused_only_by_a_live_task_of_the_same_owner(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    first = submit("ann's", key="k", user="ann")
    finish(claim()[0], 1)
    submit("bob's", key="k", user="bob")

    assert store.restart(first.id).status is Status.QUEUED


def test_a_duplicate_is_returned_even_when_the_queue_is_full(
    store: Store, submit: SubmitFn
) -> None:
    first = submit("worker", key="k")
    store.set_setting("max_queue_size", 1)

    assert submit("worker", key="k").id == first.id
    with pytest.raises(BoundExceeded):
        submit("other", key="other")


def test_restarting_a_task_whose_key_another_task_holds_is_refused(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    first = submit("worker", key="k")
    finish(claim()[0], 1)
    second = submit("worker", key="k")

    with pytest.raises(InvalidTransition, match=f"task {second.id[:8]} has its key"):
        store.restart(first.id)

    store.cancel(second.id)
    assert store.restart(first.id).status is Status.QUEUED


@pytest.mark.parametrize(
    "fields",
    [{"key": ""}, {"key": "a\nb"}, {"key": "x" * 257}, {"dedup_window": 60}],
    ids=["empty", "control-character", "too-long", "window-without-key"],
)
def test_a_bad_key_is_refused(store: Store, fields: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        store.submit({"command": ["echo"], **fields})
    assert store.list_tasks() == []


def test_concurrent_submits_with_one_key_create_one_task(store: Store, store_url: str) -> None:
    # Given eight writers, each with its own connection, released together
    stores = [open_store(store_url) for _ in range(8)]
    start = threading.Barrier(len(stores))
    ids: list[str] = []
    errors: list[BaseException] = []

    def submit(handle: Store) -> None:
        start.wait()
        try:
            ids.append(handle.submit({"command": ["echo"], "key": "once"}).id)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for handle in stores:
        handle.close()

    # Then every submit got the one task there is
    assert errors == []
    assert len(set(ids)) == 1
    assert [t.id for t in store.list_tasks()] == ids[:1]
