"""Interactive runs in the store: the needs-input mark, and a slot given back while a run
waits for input and taken again (`release_while_idle`), on every backend."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput
from slotline.store import Store


def test_an_interactive_task_keeps_its_flag_and_the_mark_comes_and_goes(store: Store) -> None:
    task = store.submit({"command": ["agent"], "interactive": True})
    assert store.get(task.id).interactive is True
    (claim,) = store.claim("n1").claims
    attempt = claim.attempt.id

    assert store.mark_needs_input(task.id, attempt, "quiet for 30s") is True
    assert store.mark_needs_input(task.id, attempt, "again") is False  # once per spell
    marked = store.get(task.id)
    assert marked.needs_input_at is not None
    assert marked.slot_released is None  # without release, it keeps its slot
    assert store.clear_needs_input(task.id, attempt) is True
    assert store.clear_needs_input(task.id, attempt) is False
    assert store.get(task.id).needs_input_at is None
    kinds = [e.kind for e in store.task_events(task.id)]
    assert kinds[-2:] == ["needs_input", "output_resumed"]

    # The end of the run clears a mark left on it.
    store.mark_needs_input(task.id, attempt, "quiet")
    store.finish(attempt, claim.attempt.token, 0)
    assert store.get(task.id).needs_input_at is None


def test_a_run_that_gives_its_slot_back_lets_another_start_and_waits_for_one(
    store: Store,
) -> None:
    # Given one slot, taken by an interactive run, and a task in line behind it,
    store.set_setting("max_concurrent", 1)
    asker = store.submit({"command": ["agent"], "interactive": True, "title": "asker"})
    (claim,) = store.claim("n1").claims
    behind = store.submit({"command": ["true"], "title": "behind"})
    assert store.claim("n1").claims == []
    # when it needs input and gives its slot back,
    assert store.mark_needs_input(asker.id, claim.attempt.id, "quiet", release=True)
    released = store.get(asker.id)
    assert released.slot_released is not None
    assert store.status().active == 0
    # then the task behind it starts, and the slot is not given twice.
    (started,) = store.claim("n1").claims
    assert started.task.id == behind.id
    assert store.retake_slot(asker.id, claim.attempt.id) == "the 1 slot is taken"
    assert store.get(asker.id).slot_released is not None
    # Once that run ends, it takes its slot again: the line holds again.
    store.finish(started.attempt.id, started.attempt.token, 0)
    assert store.retake_slot(asker.id, claim.attempt.id) is None
    assert store.get(asker.id).slot_released is None
    assert store.status().active == 1
    store.submit({"command": ["true"]})
    assert store.claim("n1").claims == []
    assert "slot_retaken" in [e.kind for e in store.task_events(asker.id)]


def test_a_forced_retake_goes_over_the_limit_and_holds_the_line(store: Store) -> None:
    store.set_setting("max_concurrent", 1)
    asker = store.submit({"command": ["agent"], "interactive": True})
    (claim,) = store.claim("n1").claims
    store.mark_needs_input(asker.id, claim.attempt.id, "quiet", release=True)
    store.submit({"command": ["true"]})
    (other,) = store.claim("n1").claims
    # It printed again by itself: it holds a slot at once, over the limit,
    assert store.retake_slot(asker.id, claim.attempt.id, force=True) is None
    assert store.status().active == 2
    # and nothing else starts until the count is back under it.
    store.submit({"command": ["true"]})
    assert store.claim("n1").claims == []
    store.finish(other.attempt.id, other.attempt.token, 0)
    assert store.claim("n1").claims == []
    store.finish(claim.attempt.id, claim.attempt.token, 0)
    assert len(store.claim("n1").claims) == 1


def test_interactive_is_for_commands_only(store: Store) -> None:
    with pytest.raises(InvalidInput, match="interactive: only a command runs in a terminal"):
        store.submit({"callable": "f", "interactive": True})
