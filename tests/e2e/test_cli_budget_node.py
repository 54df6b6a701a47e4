"""A budget end to end, with `slotline serve` and a fake coding agent that prints a
Claude-style result (tests/fake_agent.py): the node reads a run's cost, the budget is
reached, the next queued task of that key is held with its reason, and it starts once
the window rolls. The node's clock is the real one: the window is a few seconds long,
and the test waits on each state, not on a time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from e2e.conftest import Run, Serve, ok
from slotline.models import Status
from slotline.store import open_store
from waiting import until

FAKE = str(Path(__file__).resolve().parent.parent / "fake_agent.py")
WINDOW = 6.0  # seconds: long enough to read the held state, short enough to wait out


@pytest.mark.timeout(120)
def test_a_runs_cost_reaches_the_budget_holds_the_next_and_the_window_releases_it(
    cli: Run, serve: Serve, tmp_path: Path, store_path: Path
) -> None:
    # Given: claude runs cost $1.20 each; claude may spend $1 in a window of a few seconds
    agent = {
        "command": [sys.executable, FAKE, "--cost", "1.2", "--", "{prompt}"],
        "usage": {"json": {"cost_usd": "total_cost_usd", "session_id": "session_id"}},
        "budget": f"1usd/{int(WINDOW)}s",
    }
    config = {"max_concurrent": 1, "agents": {"claude": agent}}
    (tmp_path / "slotline.yaml").write_text(json.dumps(config))
    serve()
    store = open_store(store_path)
    try:
        # When: a first run ends, having printed its cost
        first = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "one"))
        done = until(lambda: (t := store.get(first["id"])).status is Status.SUCCEEDED and t)
        attempt = done.attempts[0]
        assert attempt.usage is not None
        assert attempt.usage.cost_usd == pytest.approx(1.2)

        # Then: the budget is reached, and the next claude task is held with its reason
        second = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "two"))
        shown = ok(cli("--json", "show", second["id"]))
        assert shown["status"] == "queued"
        assert shown["status_reason"].startswith(
            f"budget agent[claude] 1usd/{int(WINDOW)}s reached ($1.20 spent); may start at "
        )
        assert shown["budget_until"] is not None
        assert "budget agent[claude]" in cli("status").out
        until(lambda: any(e.kind == "budget_reached" for e in store.events()))

        # When the window rolls past the first run: the second starts and ends
        ended = until(lambda: (t := store.get(second["id"])).status is Status.SUCCEEDED and t)
        assert attempt.finished_at is not None
        assert ended.attempts[0].started_at >= attempt.finished_at + WINDOW - 0.5
        assert any(e.kind == "budget_released" for e in store.events())
    finally:
        store.close()
