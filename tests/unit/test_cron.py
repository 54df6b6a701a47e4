"""The pure parts of schedules and start times: cron ticks in a zone, the overlap
decision, and the times `submit --at` reads."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from slotline.cli.when import parse_at
from slotline.errors import InvalidInput
from slotline.models import Kind, Priority, Status, Task
from slotline.scheduler import cron

PARIS = ZoneInfo("Europe/Paris")


def at(*args: int, tz: object = UTC) -> float:
    return datetime(*args, tzinfo=tz).timestamp()  # type: ignore[arg-type, misc]


def task(status: Status, task_id: str = "a" * 32) -> Task:
    return Task(
        id=task_id, kind=Kind.COMMAND, command=("true",), callable=None, args={}, title="t",
        agent=None, workspace=None, user=None, labels={}, env={}, priority=Priority.NORMAL,
        boosted=False, start_now=False, rank="r", status=status, status_reason=None,
        depends_on=(), parent_id=None, depth=0, max_attempts=1, backoff=0.0, timeout=None,
        queue_ttl=None, not_before=None, kill_request=None, restart_requested=False,
        created_at=0.0, queued_at=None, started_at=None, finished_at=None, exit_code=None,
        failure_reason=None, attempt_count=0, attempt_base=0, current_attempt=None,
    )  # fmt: skip


def test_the_next_tick_is_strictly_after_the_given_time() -> None:
    three = at(2026, 1, 1, 3)

    assert cron.next_tick("0 3 * * *", "UTC", three - 1) == three
    assert cron.next_tick("0 3 * * *", "UTC", three) == three + 86400


def test_ticks_follow_daylight_saving_in_their_zone() -> None:
    # 03:00 in Paris is 02:00 UTC in winter and 01:00 UTC in summer.
    winter = cron.next_tick("0 3 * * *", "Europe/Paris", at(2026, 3, 28))
    summer = cron.next_tick("0 3 * * *", "Europe/Paris", at(2026, 3, 30))

    assert winter == at(2026, 3, 28, 2)
    assert summer == at(2026, 3, 30, 1)


def test_a_sixth_field_gives_seconds() -> None:
    assert cron.next_tick("*/5 * * * * *", "UTC", at(2026, 1, 1)) == at(2026, 1, 1) + 5


@pytest.mark.parametrize("expr", ["", "every day", "61 * * * *", "0 0 30 2 *", "* " * 200])
def test_bad_expressions_are_refused(expr: str) -> None:
    with pytest.raises(InvalidInput, match="cron"):
        cron.check_cron(expr)


def test_overlap_decisions() -> None:
    going = [task(Status.RUNNING, "1" * 32), task(Status.QUEUED, "2" * 32)]

    assert cron.decide("skip", []) == cron.Tick(submit=True)
    skipped = cron.decide("skip", going)
    assert not skipped.submit
    assert "11111111, 22222222" in (skipped.reason or "")
    assert cron.decide("queue", going) == cron.Tick(submit=True)
    assert cron.decide("replace", going) == cron.Tick(submit=True, cancel=("1" * 32, "2" * 32))
    assert cron.decide("skip", [task(Status.BLOCKED)]).submit


def test_a_schedule_round_trips_through_its_json() -> None:
    schedule = cron.Schedule(
        name="s", cron="0 3 * * *", tz="UTC", overlap="queue", spec={"command": ["x"]},
        paused=True, origin="api", next_at=at(2026, 1, 1, 3), last_at=None,
        last_task_id=None, created_at=at(2026, 1, 1), updated_at=at(2026, 1, 1), live=("a",),
    )  # fmt: skip

    assert cron.Schedule.from_dict(schedule.to_dict()) == schedule


# -- submit --at ----------------------------------------------------------------------------

NOW = datetime(2026, 11, 24, 14, 0, tzinfo=PARIS)


def test_a_time_of_day_is_its_next_occurrence_in_local_time() -> None:
    assert parse_at("15:30", NOW) == datetime(2026, 11, 24, 15, 30, tzinfo=PARIS).timestamp()
    assert parse_at("13:00:05", NOW) == datetime(2026, 11, 25, 13, 0, 5, tzinfo=PARIS).timestamp()


def test_iso_times_with_and_without_an_offset() -> None:
    assert parse_at("2026-11-24T15:30:00Z", NOW) == at(2026, 11, 24, 15, 30)
    assert parse_at("2026-11-24 15:30+01:00", NOW) == at(2026, 11, 24, 14, 30)
    naive = datetime(2026, 11, 24, 15, 30).astimezone().timestamp()
    assert parse_at("2026-11-24T15:30", NOW) == naive


@pytest.mark.parametrize("text", ["soon", "25:00", "12:61", "2026-13-01"])
def test_other_times_are_refused_with_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"HH:MM|time of day"):
        parse_at(text, NOW)
