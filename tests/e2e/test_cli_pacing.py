"""Rates, fairness and provider back-off through the CLI: `limits --set`, `status`, and
a real node backing off an agent whose provider refuses it (a fake agent)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from slotline.store import Store
from waiting import until

from .conftest import Run, Serve, claim_one, ok, submit


def test_limits_set_rates_fairness_and_backoff_and_show_them(cli: Run) -> None:
    result = ok(
        cli(
            "--json", "limits",
            "--set", "rate:agent[claude]=20/1m", "--set", "rate:global=100/1h",
            "--set", "rate:user=5/30s", "--set", "fairness=user", "--set", "fairness[alice]=2",
            "--set", 'backoff[claude]={"exit_codes": [75], "pattern": "HTTP 429"}',
        )
    )  # fmt: skip
    rates = {(r["key"], r["value"]): r["rate"] for r in result["rates"]}
    assert rates == {
        ("agent", "claude"): "20/1m",
        ("global", None): "100/1h",
        ("user", None): "5/30s",
    }
    assert result["fairness"] == {"key": "user", "weights": {"alice": 2.0}}
    assert result["backoff"]["claude"]["exit_codes"] == [75]
    table = cli("limits").out
    assert "rate:agent[claude] = 20/1m" in table
    assert "fairness: turns between values of user (weights: alice=2)" in table
    assert "backoff[claude]: on exit codes [75] or output matching 'HTTP 429'" in table

    removed = ok(
        cli("--json", "limits", "--set", "rate:agent[claude]=none", "--set", "fairness=none",
            "--set", "backoff[claude]=none")
    )  # fmt: skip
    assert {(r["key"], r["value"]) for r in removed["rates"]} == {("global", None), ("user", None)}
    assert removed["fairness"] is None
    assert removed["backoff"] == {}


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("rate:agent[claude]=20/0s", "more than 0s"),
        ("rate:agent[claude]=0/1m", "between 1 and 1,000,000,000, got 0"),
        ("rate:colour=5/1m", "unknown rate key"),
        ("rate:global[x]=5/1m", "takes no [VALUE]"),
        ("fairness=colour", "unknown fairness key"),
        ("fairness[alice]=0", "more than 0"),
        ('backoff[claude]={"pattern": "(unclosed"}', "not a valid regex"),
        ("backoff[claude]=nope", "not JSON"),
    ],
)
def test_bad_pacing_is_refused_and_nothing_is_applied(
    cli: Run, assignment: str, message: str
) -> None:
    result = cli("limits", "--set", "rate:user=1/1m", "--set", assignment)
    assert result.code == 2
    assert message in result.error_line()
    assert ok(cli("--json", "limits"))["rates"] == []


def test_status_shows_the_rate_and_when_the_next_start_is_allowed(cli: Run, store: Store) -> None:
    ok(cli("--json", "limits", "--set", "rate:agent[claude]=1/1h"))
    submit(cli, "--agent", "claude", "--", "true")
    waiting = submit(cli, "--agent", "claude", "--", "true")
    claim_one(store)

    status = ok(cli("--json", "status"))
    (rate,) = status["rates"]
    assert (rate["value"], rate["used"], rate["rate"]) == ("claude", 1, "1/1h")
    assert rate["next_start_at"] is not None
    assert status["queued"][0]["id"] == waiting["id"]
    assert "rate agent[claude] 1/1h: 1 used · next start in 60m" in cli("status").out


FAKE_AGENT = """
import sys
from pathlib import Path

counter = Path(sys.argv[1])
left = int(counter.read_text())
if left > 0:
    counter.write_text(str(left - 1))
    print("error: HTTP 429 Too Many Requests", flush=True)
    sys.exit(75)
print("done", flush=True)
"""


def test_a_real_node_backs_off_an_agent_its_provider_refuses_and_recovers(
    cli: Run, serve: Serve, store: Store, tmp_path: Path
) -> None:
    # Given: an agent that the provider refuses (exit 75) twice, then lets through
    agent = tmp_path / "agent.py"
    agent.write_text(textwrap.dedent(FAKE_AGENT))
    counter = tmp_path / "counter"
    counter.write_text("2")
    config = tmp_path / "slotline.yaml"
    config.write_text(
        json.dumps(
            {
                "max_concurrent": 2,
                "agents": {
                    "flaky": {
                        "command": [sys.executable, str(agent), str(counter)],
                        "backoff": {"exit_codes": [75], "delay": 0.5, "max_delay": 1},
                    }
                },
            }
        )
    )
    serve("--config", str(config))

    # When: three runs of it are queued
    ids = [
        ok(cli("--json", "--config", str(config), "submit", "--agent", "flaky", "--prompt", "p"))[
            "id"
        ]
        for _ in range(3)
    ]

    # Then: every task succeeds in the end, none failed for the provider's refusals
    until(
        lambda: all(ok(cli("--json", "show", i))["status"] == "succeeded" for i in ids),
        timeout=60, what="every task succeeded",
    )  # fmt: skip
    events = store.events(0, 10_000)
    kinds = [e.kind for e in events]
    assert "backoff" in kinds
    assert kinds.index("backoff_recovered") > kinds.index("backoff")
    backoff = next(e for e in events if e.kind == "backoff")
    assert (backoff.data["agent"], backoff.data["cap"], backoff.data["level"]) == ("flaky", 1, 1)
    throttled = [a for i in ids for a in store.get(i).attempts if a.outcome == "throttled"]
    assert len(throttled) == 2
    # Starts were held until the back-off's instant, and the cap of one held until the
    # first run after it succeeded.
    recovered = next(e for e in events if e.kind == "backoff_recovered")
    running: set[str] = set()
    for event in events:
        if event.task_id is None or event.task_id not in ids:
            continue
        if event.data.get("to") == "running":
            if backoff.seq < event.seq < recovered.seq:
                assert event.at >= backoff.data["not_before"] - 0.05
                assert len(running) == 0  # at most one running (the cap)
            running.add(event.task_id)
        elif event.data.get("from") == "running":
            running.discard(event.task_id)
    assert ok(cli("--json", "status"))["backoff"] == []
