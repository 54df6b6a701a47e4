"""A bulk verb commits in chunks: each reports its progress, another writer takes its turn
between two, and a chunk that fails leaves the chunks before it done, on every store."""

from __future__ import annotations

import threading

import pytest

import slotline.store.bulk as bulk
from slotline.errors import NotFound
from slotline.models import Status, Task
from slotline.store import Store

from .conftest import SubmitFn

CHUNK = 3
WAIT = 10.0  # seconds a test waits for another thread's submit before it fails


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "BULK_CHUNK", CHUNK)


def test_bulk_cancel_commits_chunk_by_chunk_with_one_event_per_task(
    store: Store, submit: SubmitFn
) -> None:
    # Given seven queued tasks, one of them waiting on another
    parent = submit("parent")
    tasks = [parent, *(submit(f"t{i}") for i in range(5)), submit("child", depends_on=[parent.id])]
    since = store.last_seq()
    reported: list[tuple[int, int]] = []

    # When they are cancelled together
    result = store.bulk("cancel", [t.id for t in tasks], progress=lambda *p: reported.append(p))

    # Then every one is cancelled, each with its event, and each chunk was reported
    assert result.done == [t.id for t in tasks]
    assert result.skipped == []
    assert reported == [(3, 7), (6, 7), (7, 7)]
    assert {store.get(t.id).status for t in tasks} == {Status.CANCELLED}
    cancelled = [e.task_id for e in store.events(since) if e.kind == "cancelled"]
    assert cancelled == [t.id for t in tasks]


def test_a_submit_commits_between_two_chunks_of_a_bulk_cancel(
    store: Store, submit: SubmitFn
) -> None:
    tasks = [submit(f"t{i}") for i in range(2 * CHUNK)]
    since = store.last_seq()
    submitted: list[Task] = []

    def submit_meanwhile(done: int, total: int) -> None:
        # After the first chunk, another writer submits, and the bulk waits until it has.
        if done == CHUNK:
            other = threading.Thread(target=lambda: submitted.append(submit("meanwhile")))
            other.start()
            other.join(WAIT)

    store.bulk("cancel", [t.id for t in tasks], progress=submit_meanwhile)

    assert [t.title for t in submitted] == ["meanwhile"]
    order = [e.task_id for e in store.events(since) if e.kind in ("cancelled", "submitted")]
    ids = [t.id for t in tasks]
    assert order == [*ids[:CHUNK], submitted[0].id, *ids[CHUNK:]]


def test_a_failed_chunk_leaves_the_chunks_before_it_done_and_a_rerun_finishes(
    store: Store, submit: SubmitFn, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = [submit(f"t{i}") for i in range(2 * CHUNK)]
    ids = [t.id for t in tasks]
    apply = bulk._Step.apply

    def store_gone_at_the_fifth(self: bulk._Step, tx: object, task_id: str, now: float) -> None:
        if task_id == ids[4]:
            raise ConnectionError("the store went away")
        apply(self, tx, task_id, now)  # type: ignore[arg-type]

    monkeypatch.setattr(bulk._Step, "apply", store_gone_at_the_fifth)
    with pytest.raises(ConnectionError):
        store.bulk("cancel", ids)
    statuses = [store.get(i).status for i in ids]
    assert statuses == [Status.CANCELLED] * CHUNK + [Status.QUEUED] * CHUNK

    monkeypatch.setattr(bulk._Step, "apply", apply)
    result = store.bulk("cancel", ids)
    assert result.done == ids[CHUNK:]
    assert [s["id"] for s in result.skipped] == ids[:CHUNK]
    assert {store.get(i).status for i in ids} == {Status.CANCELLED}


def test_clear_cancels_in_chunks_and_reports_them(store: Store, submit: SubmitFn) -> None:
    tasks = [submit(f"t{i}") for i in range(CHUNK + 1)]
    reported: list[tuple[int, int]] = []

    assert store.clear(progress=lambda *p: reported.append(p)) == len(tasks)

    assert reported == [(CHUNK, CHUNK + 1), (CHUNK + 1, CHUNK + 1)]
    assert {store.get(t.id).status for t in tasks} == {Status.CANCELLED}


def test_bulk_targets_reads_ids_and_prefixes_of_one_user_only(
    store: Store, submit: SubmitFn
) -> None:
    anns = [submit(f"a{i}", user="ann") for i in range(CHUNK + 1)]
    bobs = submit("b", user="bob")
    refs = [anns[0].id[:10], *(t.id for t in anns[1:])]

    assert [t.id for t in store.bulk_targets(refs, "ann")] == [t.id for t in anns]
    with pytest.raises(NotFound):
        store.bulk_targets([anns[0].id, bobs.id], "ann")
