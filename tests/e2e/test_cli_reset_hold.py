"""A real node holding an agent type until the reset time its provider printed (a fake
agent in tests/), then letting one run probe before the others follow."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from slotline.store import Store
from waiting import until

from .conftest import Run, Serve, ok

AGENT = Path(__file__).parent.parent / "fake_limited_agent.py"
PATTERN = r"(?i)(?:limit will reset at|try again in) (?P<reset>[^.\n]+)"


def config_for(tmp_path: Path, mode: str) -> Path:
    config = tmp_path / "slotline.yaml"
    agent = {
        "command": [sys.executable, str(AGENT), str(tmp_path), mode],
        "backoff": {"pattern": PATTERN, "delay": 0.2, "max_delay": 0.5},
    }
    config.write_text(json.dumps({"max_concurrent": 3, "agents": {"limited": agent}}))
    return config


def submit_limited(cli: Run, config: Path) -> str:
    submitted = cli(
        "--json", "--config", str(config), "submit", "--agent", "limited", "--prompt", "p"
    )
    return str(ok(submitted)["id"])


def test_a_reset_time_holds_the_type_until_then_and_one_run_probes_first(
    cli: Run, serve: Serve, store: Store, tmp_path: Path
) -> None:
    # Given: an agent whose provider says "your limit will reset at <in 3 s>" once
    config = config_for(tmp_path, "clock")
    serve("--config", str(config))

    # When: one run is refused, and three more are queued behind it
    first = submit_limited(cli, config)
    until((tmp_path / "refused").exists, what="the first run refused")
    ids = [first] + [submit_limited(cli, config) for _ in range(3)]

    # Then: every task succeeds, none started before the reset, and the first start
    # after it ran alone (the probe) until it succeeded
    until(
        lambda: all(ok(cli("--json", "show", i))["status"] == "succeeded" for i in ids),
        timeout=60, what="every task succeeded",
    )  # fmt: skip
    events = store.events(0, 10_000)
    (backoff,) = [e for e in events if e.kind == "backoff"]
    reset_at = backoff.data["reset_at"]
    assert reset_at is not None
    assert backoff.data["not_before"] == reset_at
    assert backoff.data["cap"] == 1
    recovered = next(e for e in events if e.kind == "backoff_recovered")
    starts = [e for e in events if e.data.get("to") == "running" and e.seq > backoff.seq]
    assert all(e.at >= reset_at - 0.05 for e in starts)
    probes = [e for e in starts if e.seq < recovered.seq]
    assert len(probes) == 1
    assert len(starts) == 4  # the refused task again, and the three behind it
    assert ok(cli("--json", "status"))["backoff"] == []


def test_try_again_in_minutes_holds_the_type_and_status_says_so(
    cli: Run, serve: Serve, store: Store, tmp_path: Path
) -> None:
    config = config_for(tmp_path, "minutes")
    serve("--config", str(config))
    task = ok(
        cli("--json", "--config", str(config), "submit", "--agent", "limited", "--prompt", "p")
    )
    until(lambda: ok(cli("--json", "status"))["backoff"], what="the type backing off")

    (throttle,) = ok(cli("--json", "status"))["backoff"]
    refused_at = store.get(task["id"]).attempts[0].finished_at
    assert refused_at is not None
    assert abs(throttle["reset_at"] - (refused_at + 59 * 60)) < 1
    assert throttle["cap"] == 1
    assert "BACKING OFF limited: at most 1 running, its limit resets in 59m" in cli("status").out
    shown = ok(cli("--json", "show", task["id"]))
    assert shown["status"] == "queued"
    assert shown["eta_start"] is not None
    assert len((tmp_path / "starts").read_text().splitlines()) == 1  # held: no second start
