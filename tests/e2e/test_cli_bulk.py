"""`slotline bulk` (by ids and by filter) and `slotline stop` (the emergency stop). Tasks
are set up through the store: only the commands under test run as processes."""

from __future__ import annotations

from typing import Any

from slotline.models import Status
from slotline.store import BULK_CHUNK, Store

from .conftest import Run, claim_one, ok


def add(store: Store, title: str = "t", **fields: Any) -> str:
    return store.submit({"command": ["true"], "title": title, **fields}).id


def test_bulk_cancel_by_filter_leaves_the_others(cli: Run, store: Store) -> None:
    batch = [add(store, f"batch {i}", agent="claude") for i in range(3)]
    other = add(store, "other", agent="aider")
    since = store.last_seq()

    result = ok(cli("--json", "bulk", "cancel", "--status", "queued", "--agent", "claude"))

    assert sorted(result["done"]) == sorted(batch)
    assert result["skipped"] == []
    assert store.get(other).status is Status.QUEUED
    assert [(e.kind, e.task_id) for e in store.events(since)] == [
        ("cancelled", task) for task in result["done"]
    ]


def test_bulk_priority_by_ids_names_what_it_skipped(cli: Run, store: Store) -> None:
    first, second, ended = add(store), add(store), add(store)
    store.cancel(ended)

    result = cli("bulk", "priority", "-p", "urgent", "-r", "release day",
                 first[:8], second, ended)  # fmt: skip

    assert result.code == 0
    assert result.out == "priority: 2 task(s) changed, 1 skipped\n"
    assert result.err.startswith(f"skipped {ended[:8]}: cannot")
    assert store.get(second).priority.label == "urgent"
    assert store.events(store.last_seq() - 1)[0].data["reason"] == "release day"


def test_bulk_refuses_ids_with_a_filter_and_a_dry_run_changes_nothing(
    cli: Run, store: Store
) -> None:
    task = add(store, "keep")
    both = cli("bulk", "hold", task, "--status", "queued")
    assert both.code == 1
    assert "not both" in both.error_line()
    assert ok(cli("--json", "bulk", "hold", "--search", "KEEP", "--dry-run"))["matched"] == [task]
    assert store.get(task).status is Status.QUEUED


def test_stop_needs_yes_then_pauses_and_terminates_every_run(cli: Run, store: Store) -> None:
    running, queued = add(store), add(store)
    claim_one(store)
    assert "--yes" in cli("stop").error_line()

    result = ok(cli("--json", "stop", "--yes", "--reason", "fire drill"))

    assert result == {"paused": True, "stopped": [running]}
    assert store.settings()["paused"]
    assert str(store.kill_requests("test-node")[0].request) == "terminate:fire drill"
    assert store.get(queued).status is Status.QUEUED


def test_bulk_over_one_chunk_shows_its_progress_on_stderr(cli: Run, store: Store) -> None:
    store.submit_many([{"command": ["true"], "title": f"t{i}"} for i in range(BULK_CHUNK + 1)])

    result = cli("bulk", "cancel", "--status", "queued")

    assert result.code == 0
    assert result.out == f"cancel: {BULK_CHUNK + 1} task(s) changed, 0 skipped\n"
    total = BULK_CHUNK + 1
    assert result.err == f"cancel: {BULK_CHUNK}/{total} task(s)\ncancel: {total}/{total} task(s)\n"
