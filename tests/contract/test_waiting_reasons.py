"""Why a task in line does not start now: every read of the line says it, by the rules of
dispatch (issue 27), and NEXT UP is the task expected to start first."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest

from slotline.models import Task
from slotline.store import Store

from .conftest import NODE, ClaimFn, Clock, SubmitFn


@pytest.fixture
def served(store: Store, clock: Clock) -> Store:
    """The store with a live node on it (a node heartbeats; with none nothing starts)."""
    store.register_node(NODE, now=clock.now)
    return store


def reason(store: Store, task: Task) -> dict[str, Any] | None:
    found: dict[str, Any] | None = store.get(task.id).to_dict()["waiting_reason"]
    return found


def test_a_task_with_a_free_slot_has_no_reason(served: Store, submit: SubmitFn) -> None:
    task = submit("free")
    assert reason(served, task) is None


def test_all_slots_taken_is_the_reason_of_the_rest(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    served.set_setting("max_concurrent", 2)
    for title in ("a", "b", "c"):
        submit(title)
    claim()
    behind = served.status().queued[0]
    assert behind.to_dict()["waiting_reason"] == {
        "kind": "slots",
        "text": "all 2 slots are taken",
        "until": None,
    }


def test_a_full_per_key_limit_names_its_key_and_count(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    served.set_limit("agent", "claude", 1)
    submit("first", agent="claude")
    claim()
    second = submit("second", agent="claude")
    other = submit("other", agent="aider")
    found = reason(served, second)
    assert found is not None
    assert (found["kind"], found["text"]) == ("limit", "agent=claude: 1/1 running")
    assert reason(served, other) is None


def test_a_delayed_task_waits_for_its_start_time(
    served: Store, submit: SubmitFn, clock: Clock
) -> None:
    later = submit("later", delay=1800)
    found = reason(served, later)
    assert found is not None
    assert found["kind"] == "start_time"
    assert found["until"] == served.get(later.id).to_dict()["not_before"]


def test_held_paused_and_dependency_reasons(served: Store, submit: SubmitFn) -> None:
    first = submit("first", hold=True)
    after = submit("after", depends_on=[first.id])
    found = reason(served, first)
    assert found is not None
    assert found["kind"] == "held"
    found = reason(served, after)
    assert found is not None
    assert found["kind"] == "dependency"
    assert found["text"] == f"waits for task {first.id[:8]} (held)"
    served.pause()
    queued = submit("queued")
    found = reason(served, queued)
    assert found is not None
    assert found["kind"] == "paused"


def test_max_concurrent_zero_says_so(served: Store, submit: SubmitFn) -> None:
    served.set_setting("max_concurrent", 0)
    task = submit("never")
    found = reason(served, task)
    assert found is not None
    assert found["kind"] == "slots"
    assert "max_concurrent is 0" in found["text"]


def test_without_a_live_node_nothing_starts_and_that_is_the_reason(
    store: Store, submit: SubmitFn
) -> None:
    task = submit("alone")
    found = reason(store, task)
    assert found is not None
    assert found["kind"] == "no_node"
    assert "slotline serve" in found["text"]


def test_next_up_is_not_a_task_that_cannot_start_next(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # Given one claude run under a claude limit of 1, and behind it, in line order: a
    # task delayed by half an hour, another claude task, and a plain task…
    served.set_limit("agent", "claude", 1)
    submit("running", agent="claude", expected_duration=60)
    claim()
    submit("delayed", delay=1800, expected_duration=60)
    submit("claude", agent="claude", expected_duration=60)
    plain = submit("plain", expected_duration=60)
    # …the plain task starts first: it is NEXT UP, though third in line.
    status = served.status()
    assert [t.title for t in status.queued] == ["delayed", "claude", "plain"]
    assert status.to_dict()["next_up"] == plain.id


def test_without_estimates_next_up_is_the_first_that_only_waits_for_a_slot(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # No run has finished: no estimate is known. The delayed task is first in line…
    served.set_setting("max_concurrent", 1)
    submit("running")
    claim()
    submit("delayed", delay=1800)
    second = submit("second")
    status = served.status()
    assert all(t.eta_start is None for t in status.queued)
    # …but the second, which waits only for the slot, is NEXT UP.
    assert status.to_dict()["next_up"] == second.id


def test_an_estimate_resting_on_no_known_run_time_is_unknown(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    served.set_setting("max_concurrent", 1)
    submit("first", agent="claude")
    claim()
    behind = submit("behind", agent="claude")
    running = served.status().running[0]
    assert (running.eta_finish, running.eta_basis) == (None, None)
    assert running.eta_unavailable == "no run of agent claude has finished yet"
    shown = served.get(behind.id).to_dict()
    assert (shown["eta_start"], shown["eta_finish"]) == (None, None)
    assert "no run of agent claude has finished yet" in shown["eta_unavailable"]
    # A configured expected run time is known, when a slot is free for it.
    known = submit("known", agent="aider", expected_duration=30)
    served.set_setting("max_concurrent", 3)
    shown = served.get(known.id).to_dict()
    assert shown["eta_unavailable"] is None
    assert shown["eta_finish"] is not None


def test_a_run_past_its_expected_time_is_overdue(
    served: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    submit("ten seconds", expected_duration=10)
    claim()
    assert served.status(now=clock.now + 5).running[0].eta_overdue is False
    overdue = served.status(now=clock.now + 11).running[0]
    assert overdue.eta_overdue is True
    assert overdue.to_dict()["eta_overdue"] is True


def test_a_function_task_no_node_serves_is_not_next_up(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # Given one slot, taken by a run of known length, then a function task no node
    # serves, then a command task…
    served.set_setting("max_concurrent", 1)
    submit("running", expected_duration=60)
    claim()
    unserved = submit("fn", command=[], callable="agents.fn", args={})
    command = submit("cmd", expected_duration=60)
    status = served.status()
    # …the function task waits on its own (its kind says so, not the line's)…
    found = served.get(unserved.id).to_dict()["waiting_reason"]
    assert found["kind"] == "unserved"
    assert "agents.fn" in found["text"]
    # …and the command task takes the slot when the run ends: it is NEXT UP, with a start.
    assert status.to_dict()["next_up"] == command.id
    assert served.get(command.id).eta_start is not None


def test_a_run_of_unknown_length_leaves_starts_it_does_not_hold_known(
    served: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given a claude limit of 1 and one claude run whose length nothing says…
    served.set_limit("agent", "claude", 1)
    submit("claude", agent="claude")
    claim()
    # …a plain task with a start time 2 h away, in a pool with free slots…
    later = submit("later", delay=7200, expected_duration=60)
    behind = submit("claude behind", agent="claude")
    # …starts at its start time: the claude run's end frees only claude's place.
    shown = served.get(later.id)
    assert shown.eta_start == pytest.approx(clock.now + 7200, abs=5)
    assert shown.eta_unavailable is None
    # The claude task behind the run waits for its end: unknown.
    assert served.get(behind.id).eta_start is None


def test_with_aging_and_fairness_reasons_follow_the_fair_order(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # Given aging and fair turns by user, two slots, one taken by alice's run…
    served.set_setting("max_concurrent", 2)
    served.set_setting("aging_interval", 3600)
    served.set_fairness("user")
    submit("running", user="alice", expected_duration=60)
    claim()
    # …alice's next task, then bob's: bob's turn comes first (alice just had hers).
    alice = submit("alice", user="alice", expected_duration=60)
    bob = submit("bob", user="bob", expected_duration=60)
    assert [t.title for t in served.status().queued] == ["bob", "alice"]
    # Bob takes the free slot; alice waits for one.
    assert reason(served, bob) is None
    found = reason(served, alice)
    assert found is not None
    assert found["kind"] == "slots"


def _at(instant: float) -> str:
    """An instant as a waiting reason writes it: UTC, to the second rounded up."""
    second = datetime.fromtimestamp(math.ceil(instant), UTC)
    return second.strftime("%Y-%m-%d %H:%M:%SZ")


def test_a_delayed_task_says_until_when_in_words(served: Store, submit: SubmitFn) -> None:
    later = submit("later", delay=1800.25)
    found = served.get(later.id).waiting_reason
    assert found is not None
    until = served.get(later.id).not_before
    assert until is not None
    assert (found.kind, found.text, found.until) == (
        "start_time",
        f"not before {_at(until)}",
        until,
    )


def test_an_agent_backing_off_its_provider_says_until_when(
    served: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given an agent type whose provider refused a run (exit 75: a back-off of a minute),
    served.set_backoff("claude", {"exit_codes": [75], "delay": 60, "max_delay": 60})
    submit("refused", agent="claude")
    [first] = claim()
    served.finish(first.attempt.id, first.attempt.token, 75, now=clock.now)
    # then a task of it in line waits for the back-off's end, in words.
    found = served.get(submit("next", agent="claude").id).waiting_reason
    assert found is not None
    assert found.kind == "backoff"
    assert found.until is not None
    assert found.text == f"agent claude is backing off its provider until {_at(found.until)}"


def test_a_rate_with_no_room_says_until_when(
    served: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # Given one start an hour for claude, taken,
    served.set_rate("agent", "claude", 1, "1h")
    submit("first", agent="claude")
    assert len(claim()) == 1
    # then the next waits for the window to have room, in words.
    found = served.get(submit("second", agent="claude").id).waiting_reason
    assert found is not None
    assert found.kind == "rate"
    assert found.until is not None
    assert found.text == f"a rate limit has no room until {_at(found.until)}"
