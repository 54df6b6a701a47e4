"""Delayed tasks: submitted with a start time (`run_at`) or a delay, they wait in line,
start no earlier, and the claim says when to look again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from slotline.clock import iso
from slotline.errors import InvalidInput
from slotline.models import Status
from slotline.store import Store

from .conftest import ClaimFn, Clock, FinishFn, SubmitFn, titles


def test_a_delayed_task_waits_for_its_time_without_blocking_the_line(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    later = submit("later", delay=600)
    submit("now")

    assert later.status is Status.QUEUED
    assert later.run_at == clock.now + 600
    assert titles(claim()) == ["now"]
    result = store.claim("node-1", now=clock.now)
    assert result.next_wake == clock.now + 600

    clock.advance(599)
    assert claim() == []
    clock.advance(1)
    assert titles(claim()) == ["later"]


def test_run_at_takes_an_epoch_time_or_iso_8601(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    at = clock.now + 3600
    by_number = submit("a", run_at=at)
    by_text = submit("b", run_at=iso(at))
    by_offset = submit("c", run_at=iso(at).replace("Z", "+00:00"))

    assert by_number.run_at == by_text.run_at == by_offset.run_at == at
    shown = store.get(by_text.id).to_dict()
    assert shown["run_at"] == iso(at)
    assert shown["status"] == "queued"


@pytest.fixture
def in_kolkata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's local time is UTC+05:30, so that local and UTC differ."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("in_kolkata")
def test_a_naive_datetime_is_local_time_like_pythons_timestamp(
    submit: SubmitFn, clock: Clock
) -> None:
    utc = datetime.fromtimestamp(clock.now, UTC).replace(microsecond=0) + timedelta(hours=1)
    local = utc.astimezone().replace(tzinfo=None)  # the same instant, on the wall clock here

    naive = submit("naive", run_at=local)
    aware = submit("aware", run_at=utc.astimezone(timezone(timedelta(hours=-3))))

    assert naive.run_at == aware.run_at == utc.timestamp() == local.timestamp()


def test_an_iso_time_without_an_offset_is_refused(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    naive_text = iso(clock.now + 3600).removesuffix("Z")

    with pytest.raises(InvalidInput, match=r"run_at: .* has no UTC offset: add one, Z for UTC"):
        submit("x", run_at=naive_text)

    assert store.list_tasks() == []


def test_a_delayed_task_shows_its_start_time_as_its_eta(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    task = submit("later", delay=900)

    queued = store.status(now=clock.now).queued

    assert [t.id for t in queued] == [task.id]
    assert queued[0].eta_start is not None
    assert queued[0].eta_start >= clock.now + 900


def test_a_start_time_in_the_past_is_refused(store: Store, submit: SubmitFn, clock: Clock) -> None:
    with pytest.raises(InvalidInput, match="in the past"):
        submit("late", run_at=clock.now - 3600)

    assert store.list_tasks() == []


def test_a_start_time_just_past_starts_at_once(
    submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    task = submit("now-ish", run_at=clock.now - 5)

    assert task.run_at is None
    assert titles(claim()) == ["now-ish"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"run_at": 1.0e6, "delay": 10}, "not both"),
        ({"run_at": "tomorrow"}, "ISO 8601"),
        ({"delay": 0}, "delay"),
        ({"delay": 600, "queue_ttl": 60}, "expire the task before its start"),
    ],
    ids=["both", "not-a-time", "zero-delay", "ttl-before-start"],
)
def test_bad_start_times_are_refused(
    store: Store, submit: SubmitFn, fields: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        submit("x", **fields)
    assert store.list_tasks() == []


def test_a_delayed_task_that_waits_on_a_dependency_keeps_its_start_time(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    first = submit("first")
    later = submit("later", depends_on=[first.id], delay=600)
    assert later.status is Status.WAITING

    finish(claim()[0], 0)

    assert store.get(later.id).status is Status.QUEUED
    assert claim() == []
    clock.advance(600)
    assert titles(claim()) == ["later"]


def test_a_held_delayed_task_keeps_its_start_time_when_released(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    task = submit("later", delay=600, hold=True)

    store.release(task.id)

    assert claim() == []
    clock.advance(600)
    assert titles(claim()) == ["later"]
