"""Rate limits: at most N starts per period for a key, exact under the claim's lock."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput
from slotline.store import Store

from .conftest import ClaimFn, Clock, FinishFn, SubmitFn, titles


def test_a_rate_caps_starts_per_window_and_wakes_the_node_when_room_comes(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    # Given: at most 2 claude starts a minute, and room for 10 running
    store.set_setting("max_concurrent", 10)
    store.set_rate("agent", "claude", 2, "1m")
    for name in "abcd":
        submit(name, agent="claude")

    # When: the node claims
    first = store.claim("node-1", now=clock.now)

    # Then: two start, the others wait, and the node is told when the next may start
    assert titles(first.claims) == ["a", "b"]
    assert first.next_wake == pytest.approx(clock.now + 60, abs=1e-3)
    for claimed in first.claims:
        finish(claimed)
    clock.advance(59)
    assert claim() == []
    clock.advance(1)
    assert titles(claim()) == ["c", "d"]


def test_a_rated_task_keeps_its_place_and_does_not_block_other_keys(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 10)
    store.set_rate("agent", "claude", 1, "1h")
    submit("c1", agent="claude")
    submit("c2", agent="claude")
    submit("other", agent="aider")

    assert titles(claim()) == ["c1", "other"]

    queued = store.status(now=clock.now).queued
    assert [(t.title, t.position) for t in queued] == [("c2", 1)]


def test_a_generic_rate_counts_each_value_apart_and_a_named_one_wins(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 10)
    store.set_rate("user", None, 1, 60)
    store.set_rate("user", "alice", 2, 60)
    for name in ("alice-1", "alice-2", "alice-3"):
        submit(name, user="alice")
    submit("bob-1", user="bob")
    submit("bob-2", user="bob")

    assert titles(claim()) == ["alice-1", "alice-2", "bob-1"]


def test_the_global_rate_counts_every_start_and_start_now_counts_too(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 10)
    store.set_rate("global", None, 2, "1m")
    first = submit("first")
    submit("second")
    submit("third")
    store.bump(first.id)  # start now: past the limits, but counted

    assert titles(claim()) == ["first", "second"]
    assert claim() == []
    clock.advance(60)
    assert titles(claim()) == ["third"]


def test_status_shows_the_rate_in_force_and_when_the_next_start_is_allowed(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 10)
    store.set_rate("agent", "claude", 1, "30s")
    submit("a", agent="claude")
    submit("b", agent="claude")
    claim()

    status = store.status(now=clock.now)

    (rate,) = status.rates
    shown = (rate["key"], rate["value"], rate["rate"], rate["used"])
    assert shown == ("agent", "claude", "1/30s", 1)
    assert rate["next_start_at"] == pytest.approx(clock.now + 30, abs=1e-3)
    assert status.to_dict()["rates"] == status.rates
    # The ETA of the waiting task respects the rate.
    (waiting,) = status.queued
    assert waiting.eta_start is not None
    assert waiting.eta_start >= clock.now + 30 - 1e-6


def test_removing_a_rate_lets_waiting_tasks_start(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 10)
    store.set_rate("workspace", "/tmp/ws", 1, "1d")
    submit("a", workspace="/tmp/ws")
    submit("b", workspace="/tmp/ws")
    assert titles(claim()) == ["a"]

    store.set_rate("workspace", "/tmp/ws", None)

    assert titles(claim()) == ["b"]
    assert store.settings().rates == ()


@pytest.mark.parametrize(
    ("key", "value", "count", "period", "message"),
    [
        ("agent", "claude", 20, "0s", "more than 0s"),
        ("agent", "claude", 0, "1m", "between 1 and 1,000,000,000, got 0"),
        ("colour", None, 5, "1m", "unknown rate key"),
        ("global", "x", 5, "1m", "takes no value"),
        ("agent", "claude", 5, "soon", "not a period"),
    ],
)
def test_bad_rates_are_refused_with_a_clear_error(
    store: Store, key: str, value: str | None, count: int, period: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        store.set_rate(key, value, count, period)
    assert store.settings().rates == ()
