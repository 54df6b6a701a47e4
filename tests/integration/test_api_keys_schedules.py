"""The Python API of idempotency keys, delayed tasks and schedules (async and sync)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import slotline
from slotline.errors import InvalidInput


def test_the_sync_queue_submits_with_keys_and_start_times(tmp_path: Path) -> None:
    with slotline.open(tmp_path / "q.db") as queue:
        first = queue.submit(["true"], key="nightly-report", delay=3600)
        again = queue.submit(["true"], key="nightly-report")

        assert (first.deduplicated, again.deduplicated, again.id) == (False, True, first.id)
        assert first.run_at is not None
        assert queue.get(first.id).run_at == first.run_at


def test_the_async_queue_manages_schedules(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            added = await queue.add_schedule(
                "nightly", "0 3 * * *", ["pytest", "-x"], tz="Europe/Paris", priority="low"
            )
            assert (added.tz, added.spec["priority"], added.spec["command"]) == (
                "Europe/Paris",
                "low",
                ["pytest", "-x"],
            )
            assert (await queue.pause_schedule("nightly")).paused
            assert not (await queue.resume_schedule("nightly")).paused
            assert [s.name for s in await queue.schedules()] == ["nightly"]
            await queue.remove_schedule("nightly")
            assert await queue.schedules() == []
            with pytest.raises(InvalidInput, match="argv list"):
                await queue.add_schedule("x", "0 * * * *", "pytest -x")

    asyncio.run(scenario())


def test_the_sync_queue_has_the_schedule_verbs(tmp_path: Path) -> None:
    with slotline.open(tmp_path / "q.db") as queue:
        queue.add_schedule("s", "*/5 * * * *", ["true"], overlap="replace")
        assert [s.overlap for s in queue.schedules()] == ["replace"]
        assert queue.remove_schedule("s").name == "s"
