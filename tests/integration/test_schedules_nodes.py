"""Real nodes firing schedules and starting delayed tasks: each tick once across three
nodes on PostgreSQL; a missed tick fires once when a node starts; a delayed task starts
when due, not before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from slotline.clock import utcnow
from slotline.models import Status
from slotline.node.node import Node
from slotline.store import Store, open_store
from waiting import until_async

# Every second; each tick's task is submitted held, so that nothing runs.
EVERY_SECOND = "* * * * * *"
HELD = {"command": ["true"], "hold": True, "title": "tick"}


async def run_nodes(nodes: list[Node], until_done: asyncio.Future[None]) -> None:
    stop = asyncio.Event()
    runs = [asyncio.create_task(node.run(stop)) for node in nodes]
    try:
        await until_done
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*runs), 30)


def fired_ticks(store: Store) -> list[str]:
    return [e.data["tick"] for e in store.events(limit=100_000) if e.kind == "schedule_fired"]


@pytest.mark.postgres
def test_three_nodes_on_postgres_submit_each_tick_once(pg_url: str, tmp_path: Path) -> None:
    # Given three nodes, each with its own connection, and a schedule ticking every second
    setup = open_store(pg_url)
    setup.add_schedule("every-second", EVERY_SECOND, HELD, overlap="queue")
    stores = [open_store(pg_url) for _ in range(3)]
    nodes = [
        Node(s, node_id=f"node-{i}", log_dir=tmp_path / f"logs{i}", heartbeat=0.5)
        for i, s in enumerate(stores)
    ]

    # When they run until six ticks have fired
    async def scenario() -> None:
        async def six_ticks() -> None:
            await until_async(lambda: len(fired_ticks(setup)) >= 6, what="six ticks fired")

        await run_nodes(nodes, asyncio.ensure_future(six_ticks()))

    asyncio.run(scenario())

    # Then each tick submitted exactly one task
    ticks = fired_ticks(setup)
    tasks = [t for t in setup.list_tasks() if t.schedule == "every-second"]
    assert len(ticks) == len(set(ticks)) == len(tasks)
    assert all(t.status is Status.HELD for t in tasks)
    for handle in (setup, *stores):
        handle.close()


def test_a_tick_missed_while_no_node_ran_fires_once(tmp_path: Path) -> None:
    # Given a schedule whose hourly ticks passed ten times while no node ran
    store = open_store(tmp_path / "store.db")
    store.add_schedule("hourly", "0 * * * *", HELD, overlap="queue", now=utcnow() - 36_000)

    # When a node starts
    async def scenario() -> None:
        node = Node(store, log_dir=tmp_path / "logs")

        async def fired() -> None:
            await until_async(lambda: fired_ticks(store), what="the missed tick fired")

        await run_nodes([node], asyncio.ensure_future(fired()))

    asyncio.run(scenario())

    # Then one task was submitted, and the next tick is ahead
    assert len(store.list_tasks()) == 1
    assert store.schedule("hourly").next_at > utcnow()
    store.close()


def test_a_node_learns_of_a_schedule_added_while_it_runs(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store.db")
    other = open_store(tmp_path / "store.db")

    async def scenario() -> None:
        node = Node(store, log_dir=tmp_path / "logs", heartbeat=0.2)

        async def added_then_fired() -> None:
            await node.ready.wait()
            await asyncio.to_thread(other.add_schedule, "s", EVERY_SECOND, HELD)
            await until_async(lambda: fired_ticks(other), what="a tick of the new schedule")

        await run_nodes([node], asyncio.ensure_future(added_then_fired()))

    asyncio.run(scenario())

    assert [t.schedule for t in other.list_tasks()][:1] == ["s"]
    store.close()
    other.close()


def test_a_node_starts_a_delayed_task_when_it_is_due_and_not_before(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store.db")
    task = store.submit({"command": ["true"], "delay": 1.0})
    assert task.run_at is not None

    async def scenario() -> None:
        node = Node(store, log_dir=tmp_path / "logs")

        async def done() -> None:
            await until_async(
                lambda: store.get(task.id).status is Status.SUCCEEDED, what="the delayed run"
            )

        await run_nodes([node], asyncio.ensure_future(done()))

    asyncio.run(scenario())

    started = store.get(task.id).attempts[0].started_at
    assert started >= task.run_at
    store.close()
