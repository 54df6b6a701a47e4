"""A node's own capacity (`serve --slots N`), beside the global and per-key limits."""

from __future__ import annotations

from slotline.store import Store


def test_a_node_claims_no_more_than_its_slots_and_others_take_the_rest(store: Store) -> None:
    # Given room for five under the global limit,
    store.set_setting("max_concurrent", 5)
    for _ in range(5):
        store.submit({"command": ["true"]})
    # when a node with two slots claims twice,
    first = store.claim("small", slots=2).claims
    again = store.claim("small", slots=2).claims
    # then it runs two, and a node without a cap of its own starts the other three.
    assert len(first) == 2
    assert again == []
    assert len(store.claim("big").claims) == 3


def test_a_node_slot_frees_when_its_run_ends(store: Store) -> None:
    # Given a node with one slot, running one of two tasks,
    for _ in range(2):
        store.submit({"command": ["true"]})
    (running,) = store.claim("small", slots=1).claims
    assert store.claim("small", slots=1).claims == []
    # when that run ends, then its slot takes the next task.
    store.finish(running.attempt.id, running.attempt.token, 0)
    assert len(store.claim("small", slots=1).claims) == 1


def test_zero_slots_start_nothing_even_when_started_now(store: Store) -> None:
    # Given a task someone asked to start now, ignoring the limits,
    task = store.submit({"command": ["true"]})
    store.bump(task.id)
    # then a node with no slots still does not run it: slots are the machine's size.
    assert store.claim("drained", slots=0).claims == []
    assert len(store.claim("other").claims) == 1
