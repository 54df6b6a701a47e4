"""Fencing on the node's side, on PostgreSQL with a real node in this process: a claim
too old to start is not started (the task goes back in line uncounted), and a function
run inside the node, which has no keeper, is stopped by the node at its deadline."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from slotline.errors import StoreError
from slotline.models import Status
from slotline.node.node import Node
from slotline.store import Store
from waiting import until_async

pytestmark = pytest.mark.postgres

LEASE = 3.0  # a margin of 0.5 s


def test_a_claim_that_took_longer_than_its_lease_is_not_started(
    pg_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a node whose first claim takes as long as a lease to come back (the node
    # froze, or its answer was held up: another node may have reclaimed the run since),
    started = tmp_path / "started"
    task = pg_store.submit({"command": ["touch", str(started)]})
    real = pg_store.claim
    slow: list[bool] = []

    def claim(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if result.claims and not slow:
            slow.append(True)
            time.sleep(LEASE)  # the fault: the answer of a committed claim, held up
        return result

    monkeypatch.setattr(pg_store, "claim", claim)

    async def scenario() -> None:
        node = Node(pg_store, log_dir=tmp_path / "logs", lease=LEASE)
        stop = asyncio.Event()
        running = asyncio.create_task(node.run(stop))
        try:
            # then the node does not start it from that stale claim: the task goes back in
            # line uncounted, and a later claim runs it.
            await until_async(lambda: pg_store.get(task.id).status is Status.SUCCEEDED)
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    first, second = pg_store.get(task.id).attempts
    assert first.reason is not None
    assert first.reason.startswith("fenced:")
    assert "not started" in first.reason
    assert second.exit_code == 0
    kinds = [e.kind for e in pg_store.events() if e.task_id == task.id]
    assert "fenced" in kinds


def test_an_async_function_in_the_node_is_stopped_at_its_deadline(
    pg_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def slow() -> None:
        await asyncio.sleep(60)

    task = pg_store.submit({"callable": "slow", "max_attempts": 1})

    async def scenario() -> None:
        node = Node(pg_store, log_dir=tmp_path / "logs", lease=LEASE, callables={"slow": slow})
        stop = asyncio.Event()
        running = asyncio.create_task(node.run(stop))
        try:
            await until_async(lambda: pg_store.get(task.id).status is Status.RUNNING)

            # When the node's heartbeats stop reaching the store (cut off from it),
            def cut(*args: Any, **kwargs: Any) -> Any:
                raise StoreError("the database is unreachable")

            monkeypatch.setattr(pg_store, "heartbeat", cut)
            # then the node stops the function itself at its deadline (no keeper does).
            await until_async(lambda: pg_store.get(task.id).status.terminal, timeout=30)
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    (attempt,) = pg_store.get(task.id).attempts
    assert attempt.reason is not None
    assert attempt.reason.startswith("fenced:"), attempt.reason
