"""Recurring schedules: each tick submits one task, as the overlap policy says; missed ticks
fire once; pause, resume, remove and the declared schedules of slotline.yaml."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from slotline.errors import InvalidInput, NotFound
from slotline.models import Status
from slotline.store import Store, open_store

from .conftest import ClaimFn, Clock, FinishFn

# 2026-01-01T00:00:00Z, a Thursday; ticks are on this fake clock.
T0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
TASK = {"command": ["echo", "backup"], "title": "backup", "priority": "high"}


@pytest.fixture
def at_t0(clock: Clock) -> Clock:
    clock.now = T0
    return clock


def test_a_schedule_ticks_at_its_cron_times(store: Store, at_t0: Clock) -> None:
    schedule = store.add_schedule("nightly", "0 3 * * *", TASK, now=T0)
    assert schedule.next_at == T0 + 3 * 3600
    assert store.fire_schedules(now=T0 + 3 * 3600 - 1).fired == []

    result = store.fire_schedules(now=T0 + 3 * 3600)

    (fired,) = result.fired
    assert fired.task is not None
    assert (fired.task.title, fired.task.schedule, fired.task.priority.label) == (
        "backup",
        "nightly",
        "high",
    )
    assert result.next_at == T0 + 27 * 3600
    assert store.schedule("nightly").last_task_id == fired.task.id
    assert store.fire_schedules(now=T0 + 3 * 3600 + 1).fired == []


def test_missed_ticks_fire_once_and_the_next_is_after_now(store: Store) -> None:
    store.add_schedule("hourly", "0 * * * *", TASK, now=T0, overlap="queue")

    # No node ran for ten hours
    result = store.fire_schedules(now=T0 + 10 * 3600 + 60)

    assert len(result.fired) == 1
    assert result.next_at == T0 + 11 * 3600
    assert len(store.list_tasks()) == 1


def test_skip_leaves_a_tick_out_while_the_previous_run_goes_on(
    store: Store, claim: ClaimFn, finish: FinishFn, at_t0: Clock
) -> None:
    store.add_schedule("s", "*/10 * * * *", TASK, now=T0, overlap="skip")
    first = store.fire_schedules(now=T0 + 600).fired[0].task
    assert first is not None
    at_t0.now = T0 + 601
    running = claim()

    skipped = store.fire_schedules(now=T0 + 1200).fired

    assert skipped[0].task is None
    assert "still going" in (skipped[0].reason or "")
    assert [e.kind for e in store.events()][-1] == "schedule_skipped"
    at_t0.now = T0 + 1300
    finish(running[0], 0)
    assert store.fire_schedules(now=T0 + 1800).fired[0].task is not None


def test_queue_submits_at_every_tick(store: Store) -> None:
    store.add_schedule("s", "*/10 * * * *", TASK, now=T0, overlap="queue")

    for tick in (1, 2, 3):
        store.fire_schedules(now=T0 + 600 * tick)

    assert len(store.schedule("s").live) == 3


def test_replace_cancels_the_previous_run_and_submits_anew(
    store: Store, claim: ClaimFn, at_t0: Clock
) -> None:
    store.add_schedule("s", "*/10 * * * *", TASK, now=T0, overlap="replace")
    first = store.fire_schedules(now=T0 + 600).fired[0].task
    assert first is not None
    at_t0.now = T0 + 601
    claim()

    second = store.fire_schedules(now=T0 + 1200).fired[0].task

    assert second is not None
    assert second.id != first.id
    # A running task is asked to stop; it ends when its process is gone.
    assert store.get(first.id).kill_request is not None
    fired = [e for e in store.events() if e.kind == "schedule_fired"][-1]
    assert fired.data["replaced"] == [first.id]


def test_pause_stops_ticks_and_resume_starts_from_the_next_tick_after_now(
    store: Store,
) -> None:
    store.add_schedule("s", "0 * * * *", TASK, now=T0)

    paused = store.pause_schedule("s", now=T0 + 60)
    assert paused.paused
    assert store.next_schedule_at() is None
    assert store.fire_schedules(now=T0 + 5 * 3600).fired == []

    resumed = store.resume_schedule("s", now=T0 + 5 * 3600 + 60)
    assert resumed.next_at == T0 + 6 * 3600
    assert [e.kind for e in store.events()][-2:] == ["schedule_paused", "schedule_resumed"]


def test_remove_deletes_the_schedule_and_keeps_its_tasks(store: Store) -> None:
    store.add_schedule("s", "0 * * * *", TASK, now=T0)
    task = store.fire_schedules(now=T0 + 3600).fired[0].task
    assert task is not None

    assert store.remove_schedule("s").name == "s"

    assert store.schedules() == []
    assert store.get(task.id).status is Status.QUEUED
    with pytest.raises(NotFound, match="no schedule named"):
        store.remove_schedule("s")


def test_a_time_zone_moves_the_ticks(store: Store) -> None:
    schedule = store.add_schedule("s", "0 3 * * *", TASK, tz="Europe/Paris", now=T0)

    assert schedule.next_at == T0 + 2 * 3600  # 03:00 in Paris is 02:00 UTC in winter


def test_a_name_in_use_is_refused_unless_replaced(store: Store) -> None:
    store.add_schedule("s", "0 * * * *", TASK, now=T0)

    with pytest.raises(InvalidInput, match="exists"):
        store.add_schedule("s", "0 3 * * *", TASK, now=T0)
    changed = store.add_schedule("s", "0 3 * * *", TASK, now=T0, replace_existing=True)

    assert changed.cron == "0 3 * * *"
    assert changed.next_at == T0 + 3 * 3600


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"name": "bad name"}, "schedule name"),
        ({"cron_expr": "every day"}, "cron"),
        ({"cron_expr": "0 0 30 2 *"}, "cron"),
        ({"tz": "Mars/Olympus"}, "time zone"),
        ({"overlap": "pile"}, "overlap"),
        ({"spec": {"command": []}}, "command"),
        ({"spec": {"command": ["x"], "key": "k"}}, "key"),
        ({"spec": {"command": ["x"], "delay": 5}}, "delay"),
    ],
    ids=["name", "cron", "never-ticks", "tz", "overlap", "task", "key", "delay"],
)
def test_bad_schedules_are_refused(store: Store, args: dict[str, Any], message: str) -> None:
    given: dict[str, Any] = {"name": "s", "cron_expr": "0 * * * *", "spec": TASK, **args}

    with pytest.raises(InvalidInput, match=message):
        store.add_schedule(given.pop("name"), given.pop("cron_expr"), given.pop("spec"), **given)
    assert store.schedules() == []


def test_a_refused_tick_is_logged_and_the_schedule_goes_on(store: Store) -> None:
    store.add_schedule("s", "0 * * * *", TASK, now=T0)
    store.set_setting("max_queue_size", 0)

    (fired,) = store.fire_schedules(now=T0 + 3600).fired

    assert fired.task is None
    assert "queue is full" in (fired.reason or "")
    assert store.schedule("s").next_at == T0 + 2 * 3600


def test_declared_schedules_are_synced_and_keep_a_pause(store: Store) -> None:
    declared = [
        {"name": "a", "cron": "0 * * * *", "overlap": "skip", "task": TASK},
        {"name": "b", "cron": "0 3 * * *", "overlap": "queue", "task": TASK},
    ]
    store.add_schedule("mine", "0 * * * *", TASK, now=T0)
    assert sorted(store.sync_schedules(declared, now=T0)) == ["a", "b"]
    store.pause_schedule("a")

    changed = store.sync_schedules([{**declared[0], "cron": "30 * * * *"}], now=T0)

    assert sorted(changed) == ["a", "b"]
    by_name = {s.name: s for s in store.schedules()}
    assert sorted(by_name) == ["a", "mine"]
    assert by_name["a"].paused
    assert by_name["a"].cron == "30 * * * *"
    assert by_name["a"].origin == "config"
    assert store.sync_schedules([{**declared[0], "cron": "30 * * * *"}], now=T0) == []


def test_concurrent_firing_submits_each_tick_once(store: Store, store_url: str) -> None:
    # Given three writers that fire the same ticks at the same moments
    store.add_schedule("s", "* * * * *", TASK, now=T0, overlap="queue")
    writers = [open_store(store_url) for _ in range(3)]
    ticks = 10
    barrier = threading.Barrier(len(writers))

    def fire(handle: Store) -> None:
        for tick in range(1, ticks + 1):
            barrier.wait()
            handle.fire_schedules(now=T0 + 60 * tick)

    threads = [threading.Thread(target=fire, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for handle in writers:
        handle.close()

    # Then each tick submitted exactly one task
    fired = [e for e in store.events() if e.kind == "schedule_fired"]
    assert len(fired) == ticks
    assert len({e.data["tick"] for e in fired}) == ticks
    assert len(store.list_tasks()) == ticks
