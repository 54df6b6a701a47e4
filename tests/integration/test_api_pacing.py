"""Rates, fairness and back-off through the Python API (sync and async faces)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import slotline
from slotline.api.queue import open_queue
from slotline.errors import InvalidInput


def test_the_sync_queue_sets_rates_fairness_and_backoff(tmp_path: Path) -> None:
    with slotline.open(tmp_path / "q.db") as queue:
        queue.set_rate("agent", "claude", 20, "1m")
        queue.set_fairness("user", {"alice": 2})
        queue.set_backoff("claude", {"exit_codes": [75]})
        settings = queue.settings()
        assert [r.rate for r in settings.rates] == ["20/1m"]
        assert settings["fairness"] == {"key": "user", "weights": {"alice": 2.0}}
        assert settings["backoff"]["claude"]["exit_codes"] == [75]
        with pytest.raises(InvalidInput, match="more than 0s"):
            queue.set_rate("agent", "claude", 20, "0s")


def test_the_async_queue_runs_rated_tasks_one_per_window(tmp_path: Path) -> None:
    async def main() -> list[str]:
        async with open_queue(tmp_path / "q.db") as queue:
            await queue.set_rate("agent", "claude", 1, "1h")
            first = await queue.submit(["true"], title="first", agent="claude")
            await queue.submit(["true"], title="second", agent="claude")
            async with queue.node(log_dir=tmp_path / "logs"):
                await queue.wait(first.id, timeout=60)
            status = await queue.status()
            assert status.rates[0]["next_start_at"] is not None
            return [t.title for t in status.queued]

    assert asyncio.run(main()) == ["second"]
