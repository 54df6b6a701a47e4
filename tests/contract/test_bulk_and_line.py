"""Bulk verbs, the emergency stop, the paged line and the chart samples, on every store."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput, NotFound
from slotline.models import Priority, Status
from slotline.stops import StopRequest
from slotline.store import Store
from slotline.taskfilter import TaskFilter

from .conftest import ClaimFn, Clock, FinishFn, SubmitFn


def kinds_of(store: Store, since: int) -> list[tuple[str, str | None]]:
    return [(e.kind, e.task_id) for e in store.events(since)]


def test_bulk_cancel_is_one_event_per_task_and_skips_what_has_ended(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    store.set_setting("max_concurrent", 1)
    done = submit("done")
    finish(claim()[0])
    a, b = submit("a"), submit("b")
    since = store.last_seq()

    result = store.bulk("cancel", [a.id, b.id[:10], done.id, a.id])

    assert result.done == [a.id, b.id]
    assert [s["id"] for s in result.skipped] == [done.id]
    assert "succeeded" in result.skipped[0]["error"]
    assert kinds_of(store, since) == [("cancelled", a.id), ("cancelled", b.id)]
    assert store.get(a.id).status is Status.CANCELLED


def test_bulk_priority_records_the_reason(store: Store, submit: SubmitFn) -> None:
    a, b = submit("a"), submit("b")
    since = store.last_seq()

    store.bulk("priority", [a.id, b.id], priority="urgent", reason="release day")

    assert store.get(b.id).priority is Priority.URGENT
    events = store.events(since)
    assert [e.data["reason"] for e in events] == ["release day", "release day"]


def test_bulk_hold_then_release(store: Store, submit: SubmitFn) -> None:
    a, b = submit("a"), submit("b")
    assert store.bulk("hold", [a.id, b.id]).done == [a.id, b.id]
    assert store.get(a.id).status is Status.HELD
    assert store.bulk("release", [a.id, b.id]).done == [a.id, b.id]
    assert store.get(a.id).status is Status.QUEUED


def test_bulk_refuses_unknown_tasks_and_verbs_changing_nothing(
    store: Store, submit: SubmitFn
) -> None:
    a = submit("a")
    with pytest.raises(NotFound):
        store.bulk("cancel", [a.id, "ffffffffffff"])
    with pytest.raises(InvalidInput, match="unknown bulk verb"):
        store.bulk("explode", [a.id])
    with pytest.raises(InvalidInput, match="priority"):
        store.bulk("priority", [a.id])
    assert store.get(a.id).status is Status.QUEUED


def test_emergency_stop_pauses_and_asks_every_run_to_stop(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 2)
    submit("a"), submit("b"), submit("c")
    running = {c.task.id for c in claim()}

    stopped = store.emergency_stop("fire drill")

    assert set(stopped) == running
    assert store.settings()["paused"]
    assert {t.kill_request for t in store.status().running} == {StopRequest.terminate("fire drill")}
    assert claim() == []


def test_line_pages_keep_positions_and_the_next_up(store: Store, submit: SubmitFn) -> None:
    tasks = [submit(f"t{i}", agent="odd" if i % 2 else "even") for i in range(5)]
    store.hold(tasks[4].id)

    page = store.line(offset=2, limit=2)

    assert [(t.title, t.position) for t in page.status.queued] == [("t2", 3), ("t3", 4)]
    assert page.queued_total == 4
    assert page.next_up == tasks[0].id
    assert [t.title for t in page.parked] == ["t4"]

    odd = store.line(wanted=TaskFilter(agent="odd"))
    assert [(t.title, t.position) for t in odd.status.queued] == [("t1", 2), ("t3", 4)]
    assert odd.queued_total == 2


def test_samples_are_written_once_per_interval_and_kept_a_day(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 1)
    submit("a"), submit("b"), submit("c")
    finish(claim()[0])
    claim()
    at = clock.now + 1

    store.record_sample(10, now=at)
    store.record_sample(10, now=at + 0.5)  # the same interval (another node): not written
    store.record_sample(10, now=at + 86_410)  # over a day later: the first is pruned

    (sample,) = store.samples(0)
    assert sample.at == at + 86_410
    assert (sample.queued, sample.running, sample.max_concurrent) == (1, 1, 1)
    assert sample.finished == 0  # "a" ended a day before this interval


def test_a_sample_counts_the_tasks_ended_in_its_interval(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    submit("a"), submit("b")
    ok, bad = claim()
    finish(ok)
    finish(bad, exit_code=3)

    store.record_sample(10, now=clock.now + 1)

    (sample,) = store.samples(clock.now)
    assert (sample.finished, sample.failed, sample.queued) == (2, 1, 0)
    assert [t.title for t in store.finished_since(clock.now - 1)] == ["a", "b"]
