"""Provider back-off with a reset time: when the back-off pattern captures when the
provider's limit resets, the type's starts hold until then instead of blindly; then one
run probes, and the others follow once it succeeds (or the type backs off again)."""

from __future__ import annotations

import logging

import pytest

from slotline.models import Status
from slotline.store import Claim, Store

from .conftest import ClaimFn, Clock, SubmitFn, titles

# One named group per alternative that says when (RE2 refuses a repeated name).
RULE = {
    "pattern": r"(?i)(?:limit will reset at|try again in) (?P<reset>[^.\n]+)|HTTP 429",
    "delay": 5,
    "max_delay": 10,
}


def end(store: Store, clock: Clock, claimed: Claim, code: int, output: str | None = None) -> None:
    attempt = claimed.attempt
    store.finish(attempt.id, attempt.token, code, now=clock.now, output=output)


def test_a_reset_time_holds_starts_until_then_then_one_probes_and_the_rest_follow(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given: claude's provider refuses a run, saying to try again in 59 minutes
    store.set_setting("max_concurrent", 3)
    store.set_backoff("claude", RULE)
    for n in range(5):
        submit(f"c{n}", agent="claude", expected_duration=60)
    first, *others = claim()
    for claimed in others:  # they were fine
        end(store, clock, claimed, 0)
    end(store, clock, first, 1, output="Error: usage limit. Try again in 59 minutes.\n")

    # Then: the hold lasts until the reset (not the blind 5-10 s), shown in status
    (throttle,) = store.status(now=clock.now).backoff
    assert throttle["reset_at"] == pytest.approx(clock.now + 59 * 60, abs=1e-3)
    assert throttle["not_before"] == pytest.approx(clock.now + 59 * 60, abs=1e-3)
    assert throttle["cap"] == 1
    (event,) = [e for e in store.events(0, 10_000) if e.kind == "backoff"]
    assert event.data["reset_at"] == pytest.approx(clock.now + 59 * 60, abs=1e-3)
    held = store.claim("node-1", now=clock.now)
    assert held.claims == []
    assert held.next_wake == pytest.approx(clock.now + 59 * 60, abs=1e-3)
    queued = store.status(now=clock.now).queued
    assert all(t.eta_start is not None and t.eta_start >= clock.now + 59 * 60 - 1 for t in queued)
    clock.advance(59 * 60 - 1)
    assert claim() == []

    # When: the reset passes, one run probes (cap 1)
    clock.advance(1)
    (probe,) = claim()
    assert claim() == []
    end(store, clock, probe, 0)

    # Then: once it succeeds, the rest follow at the normal concurrency
    assert len(claim()) == 2
    assert store.status(now=clock.now).backoff == []


def test_a_refused_probe_backs_off_again(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_backoff("claude", RULE)
    for n in range(3):
        submit(f"c{n}", agent="claude")
    store.set_setting("max_concurrent", 1)
    (first,) = claim()
    end(store, clock, first, 1, output=f"limit will reset at {int(clock.now) + 2}.\n")
    (throttle,) = store.status(now=clock.now).backoff
    assert throttle["reset_at"] == int(clock.now) + 2  # an epoch
    clock.advance(2)
    (probe,) = claim()
    end(store, clock, probe, 1, output="HTTP 429")  # no reset said: blind, one step down
    (throttle,) = store.status(now=clock.now).backoff
    assert throttle["reset_at"] is None
    assert throttle["level"] == 2
    assert 5 <= throttle["not_before"] - clock.now <= 15
    assert claim() == []


def test_an_unreadable_reset_falls_back_to_the_blind_back_off_and_is_logged(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    store.set_backoff("claude", RULE)
    task = submit("c", agent="claude")
    (first,) = claim()
    with caplog.at_level(logging.WARNING, logger="slotline.backoff"):
        end(store, clock, first, 1, output="limit will reset at teatime\n")

    (throttle,) = store.status(now=clock.now).backoff
    assert throttle["reset_at"] is None
    assert 2.5 <= throttle["not_before"] - clock.now <= 7.5  # the blind delay, jittered
    assert "cannot read when the limit of claude resets from 'teatime'" in caplog.text
    assert store.get(task.id).status is Status.QUEUED


def test_a_later_reset_from_a_run_in_flight_extends_the_hold(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 2)
    store.set_backoff("claude", RULE)
    submit("a", agent="claude")
    submit("b", agent="claude")
    a, b = claim()
    clock.advance(1)
    end(store, clock, a, 1, output="try again in 10 minutes")
    end(store, clock, b, 1, output="try again in 20 minutes")  # in flight when a was refused
    (throttle,) = store.status(now=clock.now).backoff
    assert throttle["not_before"] == pytest.approx(clock.now + 1200, abs=1e-3)
    assert throttle["level"] == 1
    assert titles(claim()) == []
