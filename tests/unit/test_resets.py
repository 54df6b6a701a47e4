"""Reading when a provider's limit resets from the text its refusal printed."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotline.pacing import backoff
from slotline.pacing.backoff import BackoffRule
from slotline.pacing.resets import JUST_PASSED, MAX_AHEAD, parse_reset

PARIS = ZoneInfo("Europe/Paris")
# 2025-03-10 10:20:00 in Paris (UTC+1)
NOW = datetime(2025, 3, 10, 10, 20, tzinfo=PARIS).timestamp()


def at(hour: int, minute: int = 0, second: int = 0, day: int = 10) -> float:
    return datetime(2025, 3, day, hour, minute, second, tzinfo=PARIS).timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3pm", at(15)),
        ("3 PM", at(15)),
        ("3:30pm", at(15, 30)),
        ("11am", at(11)),
        ("12am", at(0, day=11)),  # midnight: the next one
        ("12pm", at(12)),
        ("9am", at(9, day=11)),  # passed today, over an hour ago: tomorrow
        ("10am", NOW),  # passed 20 minutes ago: already reset
        ("15:00", at(15)),
        ("10:20:30", at(10, 20, 30)),
        ("at 3pm.", at(15)),
        ("3pm (UTC)", datetime(2025, 3, 10, 15, tzinfo=UTC).timestamp()),
        (
            "3pm (America/New_York)",
            datetime(2025, 3, 10, 15, tzinfo=ZoneInfo("America/New_York")).timestamp(),
        ),
        ("59 minutes", NOW + 59 * 60),
        ("in 2h", NOW + 7200),
        ("1h 30m", NOW + 5400),
        ("30 seconds", NOW + 30),
        ("2 hours and 5 minutes", NOW + 7500),
        ("120", NOW + 120),
        (str(int(NOW) + 600), float(int(NOW) + 600)),
        (str((int(NOW) + 600) * 1000), float(int(NOW) + 600)),
        ("2025-03-10T14:00:00Z", datetime(2025, 3, 10, 14, tzinfo=UTC).timestamp()),
        ("2025-03-10T16:00:00+01:00", at(16)),
        ("2025-03-10 16:00", at(16)),
    ],
)
def test_what_a_provider_says_reads_as_an_instant(text: str, expected: float) -> None:
    assert parse_reset(text, NOW, PARIS) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    "text",
    ["soon", "", "later today", "25:00", "13pm", "3pm (Mars/Olympus)", "5 fortnights",
     "999999 hours", "2030-01-01T00:00:00Z"],
)  # fmt: skip
def test_what_cannot_be_read_is_none(text: str) -> None:
    assert parse_reset(text, NOW, PARIS) is None


def test_a_time_of_day_without_a_zone_is_the_nodes_local_time() -> None:
    now = datetime(2025, 3, 10, 10, 20).timestamp()  # naive: local
    assert parse_reset("3pm", now) == datetime(2025, 3, 10, 15).timestamp()


def test_the_next_occurrence_keeps_the_wall_time_across_daylight_saving() -> None:
    # Paris moves to summer time in the night of 29-30 March 2025.
    now = datetime(2025, 3, 29, 16, 0, tzinfo=PARIS).timestamp()
    assert parse_reset("3pm", now, PARIS) == datetime(2025, 3, 30, 15, tzinfo=PARIS).timestamp()


@given(st.integers(0, 23), st.integers(0, 59), st.integers(0, 86399))
def test_a_clock_time_is_the_next_one_within_a_day(hour: int, minute: int, offset: int) -> None:
    now = NOW + offset
    found = parse_reset(f"{hour:02d}:{minute:02d}", now, ZoneInfo("UTC"))
    assert found is not None
    if found == now:  # it passed within the hour: already reset
        today = datetime.fromtimestamp(now, UTC).replace(hour=hour, minute=minute, second=0)
        assert 0 <= now - today.timestamp() <= JUST_PASSED
        return
    assert now < found <= now + 86400 - JUST_PASSED
    when = datetime.fromtimestamp(found, UTC)
    assert (when.hour, when.minute, when.second) == (hour, minute, 0)


@given(st.integers(1, 10_000), st.sampled_from(["s", "m", "h", " seconds", " minutes"]))
def test_a_delay_is_now_plus_it(amount: int, unit: str) -> None:
    seconds = amount * {"s": 1, "m": 60, "h": 3600, " seconds": 1, " minutes": 60}[unit]
    found = parse_reset(f"in {amount}{unit}", NOW)
    if seconds > MAX_AHEAD:
        assert found is None
    else:
        assert found == pytest.approx(NOW + seconds, abs=1e-3)


@pytest.mark.parametrize(
    ("read_at", "expected"),
    [
        ((15, 0, 5), "now"),  # just passed: reset, no 24-hour hold
        ((15, 59, 0), "now"),
        ((16, 0, 1), "tomorrow"),  # over an hour ago: the next one
        ((14, 59, 0), "today"),
    ],
)
def test_a_time_of_day_that_has_just_passed_is_already_reset(
    read_at: tuple[int, int, int], expected: str
) -> None:
    now = at(*read_at)
    found = parse_reset("3pm", now, PARIS)
    want = {"now": now, "today": at(15), "tomorrow": at(15, day=11)}[expected]
    assert found == pytest.approx(want, abs=1e-3)
    naive_now = datetime(2025, 3, 10, *read_at).timestamp()  # the node's local time
    naive = {"now": naive_now, "today": datetime(2025, 3, 10, 15).timestamp(),
             "tomorrow": datetime(2025, 3, 11, 15).timestamp()}[expected]  # fmt: skip
    assert parse_reset("3pm", naive_now) == pytest.approx(naive, abs=1e-3)


def test_refused_again_after_the_reset_time_backs_off_blindly_not_at_once() -> None:
    # Given a provider that said its limit resets at 3pm, and still refuses at 15:20
    # (the reset read then is "now"),
    rule = BackoffRule(delay=30.0, max_delay=900.0)
    now = at(15, 20)
    reset = parse_reset("3pm", now, PARIS)
    assert reset == pytest.approx(now, abs=1e-3)
    first = backoff.on_throttled(rule, None, "claude", 4, now - 1, now, 1.0, "429", reset)
    # then the next start waits the rule's delay (no probe at once),
    assert first.not_before == pytest.approx(now + 30.0, abs=1e-3)
    assert first.reset_at is None
    # and a probe refused again waits twice as long, as without a reset time.
    later = now + 31
    second = backoff.on_throttled(rule, first, "claude", 4, later - 0.5, later, 1.0, "429", later)
    assert second.not_before == pytest.approx(later + 60.0, abs=1e-3)
