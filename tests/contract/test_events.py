"""Events: every change is logged, numbered in order, and replays to the current state."""

from __future__ import annotations

from slotline.models import Event, Status
from slotline.store import Store

from .conftest import NODE, ClaimFn, Clock, FinishFn, SubmitFn


def new_events(store: Store, since: int) -> list[tuple[str, str | None]]:
    return [(e.kind, e.task_id) for e in store.events(since=since)]


def replay(events: list[Event]) -> dict[str, str]:
    """Each task's status according to the last event that moved it."""
    state: dict[str, str] = {}
    for event in events:
        if event.task_id is not None and "to" in event.data:
            state[event.task_id] = event.data["to"]
    return state


def test_every_verb_appends_its_events(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    seq = store.last_seq()

    def logged() -> list[tuple[str, str | None]]:
        nonlocal seq
        found = new_events(store, seq)
        seq = store.last_seq()
        return found

    a = submit("a", max_attempts=2, backoff=1)
    assert logged() == [("submitted", a.id)]
    b = submit("b", depends_on=[a.id])
    c = submit("c")
    d = submit("d")
    assert logged() == [("submitted", b.id), ("submitted", c.id), ("submitted", d.id)]
    store.set_setting("max_concurrent", 1)
    store.set_limit("agent", None, 2)
    store.set_exempt_agents(["pm"])
    store.pause()
    store.resume()
    assert logged() == [("settings", None), ("limit", None)] + [("settings", None)] * 3
    store.boost(c.id)
    store.move(c.id, to=2)
    store.set_priority(c.id, "low")
    store.hold(c.id)
    store.release(c.id)
    store.add_dependency(d.id, c.id)
    assert logged() == [
        ("boosted", c.id),
        ("moved", c.id),
        ("priority", c.id),
        ("held", c.id),
        ("released", c.id),
        ("dependency_added", d.id),
        ("waiting", d.id),
    ]

    (running,) = claim()
    assert logged() == [("claimed", a.id)]
    store.record_start(running.attempt.id, running.attempt.token, pid=99)
    assert logged() == [("started", a.id)]
    finish(running, 1)
    assert logged() == [("retry", a.id)]
    store.bump(c.id)
    (running,) = claim()
    assert logged() == [("bumped", c.id), ("claimed", c.id)]
    store.terminate(c.id, "too slow")
    assert logged() == [("terminate_requested", c.id)]
    finish(running, -15)
    assert logged() == [("terminated", c.id), ("blocked", d.id)]

    clock.advance(5)
    (running,) = claim()
    store.restart(a.id, force=True)
    assert logged() == [("claimed", a.id), ("restart_requested", a.id)]
    finish(running, -15)
    assert logged() == [("restarted", a.id)]
    (running,) = claim()
    store.cancel(a.id)
    assert logged() == [("claimed", a.id), ("cancel_requested", a.id)]
    finish(running, -15)
    # Nothing runs or can start any more: the queue has drained.
    assert logged() == [("cancelled", a.id), ("blocked", b.id), ("drained", None)]
    store.restart(a.id)
    assert logged() == [("restarted", a.id), ("unblocked", b.id)]
    (running,) = claim()
    finish(running, 0)
    assert logged() == [("claimed", a.id), ("succeeded", a.id), ("ready", b.id)]
    store.cancel(b.id)
    assert logged() == [("cancelled", b.id)]
    e = submit("e", queue_ttl=10)
    store.set_setting("max_concurrent", 0)
    clock.advance(10)
    claim()
    assert logged() == [("submitted", e.id), ("settings", None), ("expired", e.id)]
    f = submit("f")
    assert store.clear() == 2
    assert logged() == [
        ("submitted", f.id),
        ("cancelled", d.id),
        ("cancelled", f.id),
        ("cleared", None),
    ]


def test_status_changes_carry_from_and_to_and_replay_to_the_current_state(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 2)
    a = submit("a", max_attempts=2, backoff=1)
    b = submit("b", depends_on=[a.id])
    submit("c", depends_on=[b.id])
    d = submit("d")
    held = submit("held")
    store.hold(held.id)
    first, second = claim()
    finish(first, 1)
    store.cancel(d.id)
    finish(second, 0)
    clock.advance(5)
    (retry,) = claim()
    finish(retry, 1)
    store.restart(a.id)
    store.bump(held.id)
    claim()

    events = store.events(limit=10_000)

    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs))
    for event in events:
        if "to" in event.data:
            assert Status(event.data["to"])
            assert event.kind == "submitted" or Status(event.data["from"])
    assert replay(events) == {t.id: t.status.value for t in store.list_tasks()}


def test_events_resume_after_the_last_seq_seen(store: Store, submit: SubmitFn) -> None:
    submit("a")
    submit("b")
    seen = store.last_seq()
    c = submit("c")

    assert new_events(store, seen) == [("submitted", c.id)]
    assert store.events(since=store.last_seq()) == []
    assert [e.seq for e in store.events(since=0, limit=2)] == [e.seq for e in store.events()[:2]]


def test_node_registration_is_logged(store: Store) -> None:
    store.register_node(NODE)
    store.unregister_node(NODE)

    assert new_events(store, 0) == [("node_started", None), ("node_stopped", None)]
