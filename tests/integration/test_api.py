"""The async Python API, as its documentation shows it being used."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import slotline
from slotline import InvalidInput, InvalidTransition, Status
from slotline.line import STATUS_HEAD


def test_submit_run_and_wait_as_in_the_docs(tmp_path: Path) -> None:
    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            lint = await queue.submit(["true"], title="lint")
            tests = await queue.submit(
                ["sh", "-c", "exit 3"], priority="high", depends_on=[lint.id[:8]]
            )
            assert tests.status is Status.WAITING
            async with queue.node(max_concurrent=2, log_dir=tmp_path / "logs"):
                done = await queue.wait(tests.id, timeout=30)
            assert (done.status, done.exit_code, done.failure_reason) == (
                Status.FAILED,
                3,
                "exit code 3",
            )
            assert [t.title for t in await queue.list(Status.SUCCEEDED)] == ["lint"]

    asyncio.run(main())


def test_steering_and_status_through_the_api(tmp_path: Path) -> None:
    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            await queue.set_max_concurrent(1)
            await queue.pause()
            first = await queue.submit(["true"], title="first")
            second = await queue.submit(["true"], title="second")
            await queue.move(second.id, to=1)
            status = await queue.status()
            assert [t.title for t in status.queued] == ["second", "first"]
            assert status.paused
            await queue.hold(first.id)
            with pytest.raises(InvalidTransition, match="it is held"):
                await queue.restart(first.id)
            await queue.release(first.id)
            await queue.set_priority(first.id, "P0")
            assert (await queue.get(first.id)).position == 1
            assert await queue.clear() == 2

    asyncio.run(main())


def test_follow_yields_past_then_live_events(tmp_path: Path) -> None:
    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            before = await queue.submit(["true"], title="before")
            seen: list[str] = []

            async def watch() -> None:
                async for event in queue.follow(since=0):
                    seen.append(f"{event.kind}:{event.task_id}")
                    if event.kind == "cancelled":
                        return

            watching = asyncio.create_task(watch())
            await queue.cancel(before.id)
            await asyncio.wait_for(watching, 15)
            assert seen == [f"submitted:{before.id}", f"cancelled:{before.id}"]

    asyncio.run(main())


def test_callables_and_bad_input(tmp_path: Path) -> None:
    calls: list[int] = []

    async def add(a: int, b: int) -> None:
        calls.append(a + b)

    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            with pytest.raises(InvalidInput, match="argv list"):
                await queue.submit("echo hi")  # type: ignore[arg-type]
            with pytest.raises(InvalidInput, match="max_attempts"):
                await queue.submit(["true"], max_attempts=0)
            # No node serves it yet: it is submitted, with a warning that says so.
            with pytest.warns(slotline.UnservedWarning, match="no live node serves"):
                task = await queue.submit(callable="add", args={"a": 2, "b": 3})
            async with queue.node(callables={"add": add}, log_dir=tmp_path / "logs"):
                done = await queue.wait(task.id, timeout=30)
            assert done.status is Status.SUCCEEDED
            assert calls == [5]

    asyncio.run(main())


def test_a_running_task_can_submit_a_subtask_recorded_as_its_child(tmp_path: Path) -> None:
    # The node gives each run SLOTLINE_TASK_ID and SLOTLINE_STORE; `slotline submit`
    # run inside it records the parent on its own.
    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            spawn_child = [sys.executable, "-m", "slotline", "submit", "--", "true"]
            parent = await queue.submit(spawn_child, title="parent")
            async with queue.node(log_dir=tmp_path / "logs"):
                assert (await queue.wait(parent.id, timeout=30)).status is Status.SUCCEEDED
                children = [t for t in await queue.list() if t.parent_id == parent.id]
                assert len(children) == 1
                assert (await queue.wait(children[0].id, timeout=30)).status is Status.SUCCEEDED

    asyncio.run(main())


def test_a_page_is_asked_for_by_a_query_or_by_its_fields(tmp_path: Path) -> None:
    from slotline.taskfilter import ListQuery, TaskFilter

    async def main() -> None:
        async with slotline.open_queue(tmp_path / "s.db") as queue:
            for title, agent in (("a", "x"), ("b", "y"), ("c", "x")):
                await queue.submit(["true"], title=title, labels={"agent": agent})
            query = ListQuery(TaskFilter(label=["agent=x"]), newest=True)
            by_query = await queue.page(query)
            # The keywords from before ListQuery still read the same page.
            by_fields = await queue.page(TaskFilter(label=["agent=x"]), newest=True)
            assert [t.title for t in by_query.tasks] == ["c", "a"]
            assert [t.title for t in by_fields.tasks] == ["c", "a"]
            # Keywords change a query's own fields.
            assert [t.title for t in (await queue.page(query, limit=1)).tasks] == ["c"]

    asyncio.run(main())
    with slotline.open(tmp_path / "s.db") as sync:
        assert [t.title for t in sync.page(newest=True, limit=2).tasks] == ["c", "b"]


def test_status_is_the_head_of_the_line_unless_all_is_asked(tmp_path: Path) -> None:
    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            # Given more queued tasks than the head a status shows,
            many = STATUS_HEAD + 5
            await queue.submit_many([{"command": ["true"], "title": f"t{i}"} for i in range(many)])
            # the status holds the head and says how many are queued in all,
            head = await queue.status()
            assert [t.title for t in head.queued] == [f"t{i}" for i in range(STATUS_HEAD)]
            assert head.queued_total == many
            assert [t.title for t in (await queue.status(limit=2)).queued] == ["t0", "t1"]
            # and the whole line only when asked for.
            whole = await queue.status(all=True)
            assert [t.title for t in whole.queued] == [f"t{i}" for i in range(many)]
            assert whole.queued_total == many

    asyncio.run(main())
