"""The sync API (`slotline.open`) and an App's functions run by an in-process node: the
same verbs as the async `Queue`, no event loop in sight."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import slotline
from slotline.line import STATUS_HEAD
from slotline.models import Status


def test_the_sync_queue_has_the_async_verbs_without_a_loop(tmp_path: Path) -> None:
    with slotline.open(tmp_path / "q.db") as queue:
        first = queue.submit(["true"], title="first", priority="low")
        second = queue.submit(["true"], title="second")
        queue.set_max_concurrent(1)
        assert [t.title for t in queue.status().queued] == ["second", "first"]
        queue.move(first.id, to=1)
        assert queue.get(first.id).position == 1
        held = queue.hold(second.id)
        assert held.status is Status.HELD
        # Events arrive through a plain iterator.
        kinds = []
        for event in queue.follow(0):
            kinds.append(event.kind)
            if event.kind == "held":
                break
        assert kinds[0] == "submitted"
        with queue.node(log_dir=tmp_path / "logs"):
            done = queue.wait(first.id, timeout=60)
        assert done.status is Status.SUCCEEDED
        assert queue.result(first.id) is None  # a command returns nothing
    # Its loop was private, and is gone.
    assert not [t for t in threading.enumerate() if t.name == "slotline-sync"]


def test_results_of_async_and_thread_functions_come_back_through_the_handle(
    tmp_path: Path,
) -> None:
    app = slotline.App(tmp_path / "q.db")

    @app.task(name="double")
    async def double(x: int) -> list[int]:
        await asyncio.sleep(0)
        return [x, x]

    @app.task(name="fail", mode="thread")
    def fail(message: str) -> None:
        raise RuntimeError(message)

    with pytest.warns(slotline.UnservedWarning, match="no live node serves function 'double'"):
        twice = double.submit(21)
    with pytest.warns(slotline.UnservedWarning):
        failing = fail.submit("no luck")
    assert twice.status is Status.QUEUED
    with app.sync.node(callables=app.entries(), log_dir=tmp_path / "logs"):
        assert twice.result(timeout=60) == [21, 21]
        with pytest.raises(slotline.TaskFailed, match="failed: RuntimeError: no luck"):
            failing.result(timeout=60)
    assert twice.refresh().result == [21, 21]
    app.close()


def test_asubmit_and_aresult_run_on_the_callers_loop(tmp_path: Path) -> None:
    app = slotline.App(tmp_path / "q.db")

    @app.task(name="greet")
    async def greet(name: str) -> str:
        return f"hello {name}"

    async def main() -> None:
        async with app.queue.node(callables=app.entries(), log_dir=tmp_path / "logs"):
            task = await greet.options(priority="urgent").asubmit("you")
            assert task.task.priority is slotline.Priority.URGENT
            assert await task.aresult(timeout=60) == "hello you"

    asyncio.run(main())
    app.close()


def test_the_sync_status_is_the_head_of_the_line_unless_all_is_asked(tmp_path: Path) -> None:
    with slotline.open(tmp_path / "q.db") as queue:
        many = STATUS_HEAD + 5
        queue.submit_many([{"command": ["true"], "title": f"t{i}"} for i in range(many)])
        head = queue.status()
        assert [t.title for t in head.queued] == [f"t{i}" for i in range(STATUS_HEAD)]
        assert head.queued_total == many
        whole = queue.status(all=True)
        assert [t.title for t in whole.queued] == [f"t{i}" for i in range(many)]
