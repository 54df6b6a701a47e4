"""Task ids by prefix, and refusals that say what happened and what to do."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from slotline.errors import AmbiguousId, InvalidInput, InvalidTransition, NotFound
from slotline.models import Status, Task
from slotline.store import Store

from .conftest import ClaimFn, FinishFn, SubmitFn


def test_a_unique_prefix_names_a_task(store: Store, submit: SubmitFn) -> None:
    task = submit("a")
    submit("b")

    assert store.get(task.id[:6]).id == task.id
    assert store.get(task.id.upper()).id == task.id
    assert store.get(f"  {task.id[:12]} ").id == task.id
    assert store.hold(task.id[:8]).status is Status.HELD


def test_an_ambiguous_prefix_is_refused_and_changes_nothing(store: Store, submit: SubmitFn) -> None:
    # With 17 tasks, at least two ids share their first hex digit.
    tasks = [submit(f"t{i}") for i in range(17)]
    digit, _ = Counter(t.id[0] for t in tasks).most_common(1)[0]
    seq = store.last_seq()

    with pytest.raises(AmbiguousId, match="several tasks"):
        store.get(digit)
    with pytest.raises(AmbiguousId):
        store.cancel(digit)

    assert store.last_seq() == seq
    assert store.counts() == {"queued": 17}


def test_an_unknown_id_or_prefix_is_not_found(store: Store, submit: SubmitFn) -> None:
    ids = [submit(f"t{i}").id for i in range(3)]
    unknown = next(
        p for p in (f"{n:04x}" for n in range(1 << 16)) if not any(i.startswith(p) for i in ids)
    )

    with pytest.raises(NotFound):
        store.get(unknown)
    with pytest.raises(NotFound):
        store.cancel("0" * 32)


@pytest.mark.parametrize("ref", ["", "   ", "xyz", "3f2a%", "3f_a", "task-1"])
def test_a_ref_that_is_not_hex_is_invalid(store: Store, submit: SubmitFn, ref: str) -> None:
    submit("a")

    with pytest.raises(InvalidInput):
        store.get(ref)


Verb = Callable[[Store, str], Task]

CASES: list[tuple[str, str, Verb, str]] = [
    ("succeeded", "cancel", lambda s, i: s.cancel(i), "already ended"),
    ("succeeded", "hold", lambda s, i: s.hold(i), "restart it first"),
    ("succeeded", "terminate", lambda s, i: s.terminate(i), "restart it first"),
    ("running", "restart", lambda s, i: s.restart(i), "cancel it first or use --force"),
    ("running", "hold", lambda s, i: s.hold(i), "terminate or cancel it instead"),
    ("running", "bump", lambda s, i: s.bump(i), "already running"),
    ("running", "priority", lambda s, i: s.set_priority(i, "high"), "priority applies to"),
    ("queued", "terminate", lambda s, i: s.terminate(i), "use cancel"),
    ("queued", "release", lambda s, i: s.release(i), "not held"),
    ("queued", "restart", lambda s, i: s.restart(i), "already queued"),
]


@pytest.mark.parametrize(
    ("status", "verb", "call", "hint"), CASES, ids=[f"{c[1]}-{c[0]}" for c in CASES]
)
def test_an_illegal_transition_names_the_task_its_state_and_what_to_do(
    store: Store,
    submit: SubmitFn,
    claim: ClaimFn,
    finish: FinishFn,
    status: str,
    verb: str,
    call: Verb,
    hint: str,
) -> None:
    task = submit("a")
    if status != "queued":
        running = claim()[0]
        if status == "succeeded":
            finish(running)
    seq = store.last_seq()

    with pytest.raises(InvalidTransition) as raised:
        call(store, task.id)

    message = str(raised.value)
    assert message.startswith(f"cannot {verb} task {task.id[:8]}: it is {status}; ")
    assert hint in message
    assert raised.value.details == {"task_id": task.id, "status": status}
    assert store.get(task.id).status == status
    assert store.last_seq() == seq
