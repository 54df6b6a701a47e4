"""Budgets: no new start of a key once its finished runs spent the budget in the
trailing window, until enough spend ages out; decided in the claim, on every store."""

from __future__ import annotations

from typing import Any

import pytest

from slotline.errors import InvalidInput
from slotline.models import Usage
from slotline.store import Claim, Store

from .conftest import Clock, SubmitFn, titles


def spend(store: Store, claimed: Claim, clock: Clock, **usage: Any) -> None:
    """Finish a claimed run at the clock's time, having spent `usage`."""
    attempt = claimed.attempt
    store.finish(attempt.id, attempt.token, 0, now=clock.now, usage=Usage(**usage))


def kinds(store: Store, *wanted: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in store.events() if e.kind in wanted]


def test_a_dollar_budget_holds_starts_until_the_window_rolls(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given: claude may spend $5 a day, two runs at once; four claude tasks
    store.set_setting("max_concurrent", 2)
    store.set_budget("agent", "claude", 5, "1d")
    for name in "abcd":
        submit(name, agent="claude")
    first = store.claim("node-1", now=clock.now).claims
    assert titles(first) == ["a", "b"]

    # When: the first run costs $2, the second (an hour later) $3
    spend(store, first[0], clock, cost_usd=2.0)
    clock.advance(3600)
    spend(store, first[1], clock, cost_usd=3.0)
    held = store.claim("node-1", now=clock.now)

    # Then: nothing starts; the node is told to look again when the $2 ages out
    assert held.claims == []
    assert held.next_wake == pytest.approx(clock.now - 3600 + 86400, abs=1e-3)
    status = store.status(now=clock.now)
    assert [t.title for t in status.queued] == ["c", "d"]  # they keep their place
    reason = status.queued[0].status_reason or ""
    assert "budget agent[claude] 5usd/1d reached ($5.00 spent)" in reason
    assert "may start at" in reason
    [state] = status.budgets
    assert state["spent"] == pytest.approx(5.0)
    assert state["until"] == pytest.approx(clock.now - 3600 + 86400, abs=1e-3)
    assert status.queued[0].eta_start is not None
    assert status.queued[0].eta_start >= clock.now - 3600 + 86400

    # When: the window rolls past the $2 run
    clock.advance(86400 - 3600 - 1)
    assert store.claim("node-1", now=clock.now).claims == []
    clock.advance(1)
    # Then: the line moves again (the $3 run still counts, but $3 < $5)
    assert titles(store.claim("node-1", now=clock.now).claims) == ["c", "d"]


def test_budget_events_are_told_once_when_reached_and_when_released(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    store.set_budget("user", "alice", 1, "1h")
    submit("a", user="alice")
    submit("b", user="alice")
    [claimed] = store.claim("node-1", now=clock.now).claims[:1]
    spend(store, claimed, clock, cost_usd=1.5)
    store.claim("node-1", now=clock.now)
    clock.advance(10)
    store.claim("node-1", now=clock.now)

    [reached] = kinds(store, "budget_reached")
    assert reached["key"] == "user"
    assert reached["value"] == "alice"
    assert reached["spent"] == pytest.approx(1.5)
    assert reached["budget"] == "1usd/1h"
    assert reached["until"] == pytest.approx(clock.now - 10 + 3600, abs=1e-3)
    assert kinds(store, "budget_released") == []
    assert all(e.task_id is None for e in store.events() if e.kind == "budget_reached")

    clock.advance(3600)
    store.claim("node-1", now=clock.now)
    store.claim("node-1", now=clock.now)
    assert [e["value"] for e in kinds(store, "budget_released")] == ["alice"]
    assert len(kinds(store, "budget_reached")) == 1


def test_a_token_budget_counts_input_and_output_tokens(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 1)
    store.set_budget("agent", "codex", 2_000_000, "1h", unit="tok")
    submit("a", agent="codex")
    submit("b", agent="codex")
    third = submit("c", agent="codex")
    [first] = store.claim("node-1", now=clock.now).claims
    spend(store, first, clock, input_tokens=1_500_000, output_tokens=400_000)
    [second] = store.claim("node-1", now=clock.now).claims  # 1.9M < 2M: still room
    clock.advance(60)
    spend(store, second, clock, input_tokens=50_000, output_tokens=50_000, cost_usd=99.0)

    held = store.claim("node-1", now=clock.now)
    assert held.claims == []
    assert held.next_wake == pytest.approx(clock.now - 60 + 3600, abs=1e-3)
    assert "2Mtok/1h reached (2000000 tokens spent)" in (store.get(third.id).status_reason or "")


def test_a_budget_holds_only_its_own_key_and_each_value_apart(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given: every user may spend $1 an hour; alice has spent it
    store.set_setting("max_concurrent", 10)
    store.set_budget("user", None, 1, "1h")
    submit("alice-1", user="alice")
    [claimed] = store.claim("node-1", now=clock.now).claims
    spend(store, claimed, clock, cost_usd=1.0)
    submit("alice-2", user="alice")
    submit("bob-1", user="bob")
    submit("nobody")

    # Then: bob's and the unowned task start past alice's, which waits in its place
    assert titles(store.claim("node-1", now=clock.now).claims) == ["bob-1", "nobody"]
    [waiting] = store.status(now=clock.now).queued
    assert waiting.title == "alice-2"
    assert waiting.position == 1
    assert "budget user[alice] 1usd/1h reached" in (waiting.status_reason or "")
    listed = store.list_page().tasks
    assert "budget user[alice]" in (
        next(t for t in listed if t.title == "alice-2").status_reason or ""
    )


def test_a_named_budget_beats_the_generic_one_and_removing_it_releases(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 10)
    store.set_budget("label:team", None, 1, "1h")
    store.set_budget("label:team", "infra", 10, "1h")
    submit("infra-1", labels={"team": "infra"})
    submit("web-1", labels={"team": "web"})
    one, two = store.claim("node-1", now=clock.now).claims
    spend(store, one, clock, cost_usd=2.0)
    spend(store, two, clock, cost_usd=2.0)
    submit("infra-2", labels={"team": "infra"})
    submit("web-2", labels={"team": "web"})

    assert titles(store.claim("node-1", now=clock.now).claims) == ["infra-2"]
    assert [e["value"] for e in kinds(store, "budget_reached")] == ["web"]

    store.set_budget("label:team", None, None)
    assert [e["value"] for e in kinds(store, "budget_released")] == ["web"]
    assert titles(store.claim("node-1", now=clock.now).claims) == ["web-2"]


def test_the_global_budget_counts_spend_set_before_it_and_start_now_passes_it(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    submit("early")
    [claimed] = store.claim("node-1", now=clock.now).claims
    spend(store, claimed, clock, cost_usd=3.0)
    store.set_budget("global", None, 3, "1d")  # the spend before it counts
    submit("late")
    urgent = submit("urgent")
    assert store.claim("node-1", now=clock.now).claims == []
    store.bump(urgent.id)  # start now ignores budgets as it ignores limits
    assert titles(store.claim("node-1", now=clock.now).claims) == ["urgent"]
    assert [b["budget"] for b in store.settings().to_dict()["budgets"]] == ["3usd/1d"]


def test_runs_in_flight_finish_and_both_units_may_hold_one_key(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 3)
    store.set_budget("agent", "claude", 1, "1h")
    store.set_budget("agent", "claude", 1000, "1h", unit="tok")
    for name in "abc":
        submit(name, agent="claude")
    last = submit("d", agent="claude")
    a, b, c = store.claim("node-1", now=clock.now).claims
    spend(store, a, clock, input_tokens=1000)
    spend(store, b, clock, cost_usd=0.5)  # the ones in flight still finish
    spend(store, c, clock, cost_usd=0.5)
    assert store.claim("node-1", now=clock.now).claims == []
    reason = store.get(last.id).status_reason or ""
    assert "1usd/1h" in reason
    assert "1ktok/1h" in reason
    store.set_budget("agent", "claude", None, unit=None)  # every unit
    assert titles(store.claim("node-1", now=clock.now).claims) == ["d"]


@pytest.mark.parametrize(
    ("key", "value", "amount", "period", "unit", "message"),
    [
        ("agentt", None, 5, "1d", "usd", "unknown rate key"),
        ("agent", "claude", 0, "1d", "usd", "more than 0"),
        ("agent", "claude", -1, "1d", "usd", "more than 0"),
        ("agent", "claude", 5, "0s", "usd", "period"),
        ("agent", "claude", 1.5, "1d", "tok", "whole number"),
        ("agent", "claude", 5, "1d", "eur", "unknown budget unit"),
        ("global", "x", 5, "1d", "usd", "takes no value"),
        ("agent", "", 5, "1d", "usd", "must not be empty"),
    ],
)
def test_a_bad_budget_is_refused_and_nothing_changes(
    store: Store, key: str, value: str | None, amount: float, period: str, unit: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        store.set_budget(key, value, amount, period, unit=unit)
    assert store.settings().budgets == ()
