"""Several budget windows of one unit on one key (`10usd/1h` and `30usd/1d`): each is
kept, each holds on its own, a task starts only when every one has room, and removing
one names its window; on every store."""

from __future__ import annotations

import pytest

from slotline.models import Usage
from slotline.store import Claim, Store

from .conftest import Clock, SubmitFn, titles


def spend(store: Store, claimed: Claim, clock: Clock, cost_usd: float) -> None:
    attempt = claimed.attempt
    store.finish(attempt.id, attempt.token, 0, now=clock.now, usage=Usage(cost_usd=cost_usd))


def test_a_short_and_a_long_window_of_one_unit_are_both_kept(store: Store) -> None:
    store.set_budget("agent", "claude", 10, "1h")
    store.set_budget("agent", "claude", 30, "1d")
    store.set_budget("agent", "claude", 12, "1h")  # replaces the 1h one only

    assert sorted(b.budget for b in store.settings().budgets) == ["12usd/1h", "30usd/1d"]


def test_every_window_holds_and_the_task_may_start_at_the_latest(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given: claude may spend $10 an hour and $30 a day, one run at a time
    store.set_setting("max_concurrent", 1)
    store.set_budget("agent", "claude", 10, "1h")
    store.set_budget("agent", "claude", 30, "1d")
    for name in "abcd":
        submit(name, agent="claude")
    start = clock.now

    # When: the first run spends $10: the hour is full, the day is not
    [first] = store.claim("node-1", now=clock.now).claims
    spend(store, first, clock, 10.0)
    held = store.claim("node-1", now=clock.now)
    assert held.claims == []
    assert held.next_wake == pytest.approx(start + 3600, abs=1e-3)
    reason = store.status(now=clock.now).queued[0].status_reason or ""
    assert "budget agent[claude] 10usd/1h reached ($10.00 spent)" in reason
    assert "30usd/1d" not in reason

    # When: the hour rolls, the second run spends $25: now both windows are reached
    clock.advance(3600)
    [second] = store.claim("node-1", now=clock.now).claims
    spend(store, second, clock, 25.0)
    assert store.claim("node-1", now=clock.now).claims == []
    waiting = store.status(now=clock.now).queued[0]
    reason = waiting.status_reason or ""
    assert "budget agent[claude] 10usd/1h reached ($25.00 spent)" in reason
    assert "budget agent[claude] 30usd/1d reached ($35.00 spent)" in reason
    # Then: it may start when the day's $10 ages out, the later of the two
    assert waiting.budget_until == pytest.approx(start + 86400, abs=1e-3)
    reached = {
        (e.data["period"], e.data["budget"]) for e in store.events() if e.kind == "budget_reached"
    }
    assert reached == {(3600, "10usd/1h"), (86400, "30usd/1d")}

    # When: the hour rolls again, the day still holds
    clock.advance(3600)
    assert store.claim("node-1", now=clock.now).claims == []

    # When: the day's budget is removed by its window, the hour's alone has room
    store.set_budget("agent", "claude", None, "1d")
    assert [b.budget for b in store.settings().budgets] == ["10usd/1h"]
    assert titles(store.claim("node-1", now=clock.now).claims) == ["c"]


def test_a_named_value_replaces_the_generic_windows_of_its_unit(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given: each agent may spend $1 an hour and $100 a day; claude has $5 a day of its own
    store.set_setting("max_concurrent", 1)
    store.set_budget("agent", None, 1, "1h")
    store.set_budget("agent", None, 100, "1d")
    store.set_budget("agent", "claude", 5, "1d")
    for name in "ab":
        submit(name, agent="claude")
    [first] = store.claim("node-1", now=clock.now).claims

    # When: a claude run spends $2 (more than the generic hour's $1)
    spend(store, first, clock, 2.0)

    # Then: claude's own day has room, so the next claude run starts
    assert [c.task.title for c in store.claim("node-1", now=clock.now).claims] == ["b"]
