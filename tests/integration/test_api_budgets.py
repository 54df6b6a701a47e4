"""Budgets through the Python API (sync and async faces)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import slotline
from slotline.api.queue import open_queue
from slotline.errors import InvalidInput


def test_the_sync_queue_sets_and_removes_budgets(tmp_path: Path) -> None:
    with slotline.open(tmp_path / "q.db") as queue:
        queue.set_budget("agent", "claude", 50, "1d")
        queue.set_budget("user", None, 2_000_000, "1h", unit="tok")
        assert sorted(b.budget for b in queue.settings().budgets) == ["2Mtok/1h", "50usd/1d"]
        with pytest.raises(InvalidInput, match="more than 0"):
            queue.set_budget("agent", "claude", 0, "1d")
        queue.set_budget("user", None, None, unit="tok")
        assert [b.budget for b in queue.settings().budgets] == ["50usd/1d"]


def test_the_async_queue_sets_a_budget(tmp_path: Path) -> None:
    async def main() -> list[str]:
        async with open_queue(tmp_path / "q.db") as queue:
            await queue.set_budget("workspace", str(tmp_path), 3.5, 3600)
            return [b.budget for b in (await queue.settings()).budgets]

    assert asyncio.run(main()) == ["3.5usd/1h"]


def test_the_queue_keeps_several_windows_and_removes_one_by_its_period(tmp_path: Path) -> None:
    with slotline.open(tmp_path / "q.db") as queue:
        queue.set_budget("agent", "claude", 10, "1h")
        queue.set_budget("agent", "claude", 100, "1d")
        assert sorted(b.budget for b in queue.settings().budgets) == ["100usd/1d", "10usd/1h"]
        queue.set_budget("agent", "claude", None, "1h")
        assert [b.budget for b in queue.settings().budgets] == ["100usd/1d"]
