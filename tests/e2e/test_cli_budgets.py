"""Budgets through the CLI: `limits --set budget:…`, and what `status`, `ls` and `show`
say of a task a reached budget holds."""

from __future__ import annotations

import math
import re
from datetime import datetime

import pytest

from slotline.models import Usage
from slotline.store import Store

from .conftest import Run, claim_one, ok, submit


def test_limits_set_show_and_remove_budgets(cli: Run) -> None:
    result = ok(
        cli(
            "--json", "limits",
            "--set", "budget:agent[claude]=50usd/1d", "--set", "budget:user=2Mtok/1h",
            "--set", "budget:global=$200/1d", "--set", "budget:label:team[infra]=0.5usd/30m",
        )
    )  # fmt: skip
    assert {(b["key"], b["value"], b["budget"]) for b in result["budgets"]} == {
        ("agent", "claude", "50usd/1d"),
        ("user", None, "2Mtok/1h"),
        ("global", None, "200usd/1d"),
        ("label:team", "infra", "0.5usd/30m"),
    }
    table = cli("limits").out
    assert "budget:agent[claude] = 50usd/1d  (dollars spent by the runs of agent claude" in table
    assert "budget:user = 2Mtok/1h  (tokens in and out spent by the runs of each user" in table

    removed = ok(cli("--json", "limits", "--set", "budget:agent[claude]=none"))
    assert ("agent", "claude") not in {(b["key"], b["value"]) for b in removed["budgets"]}


def test_limits_keeps_several_windows_and_removes_one_by_its_window(cli: Run) -> None:
    ok(
        cli(
            "--json", "limits",
            "--set", "budget:agent[claude]=10usd/1h", "--set", "budget:agent[claude]=100usd/1d",
        )
    )  # fmt: skip
    budgets = ok(cli("--json", "limits"))["budgets"]
    assert sorted(b["budget"] for b in budgets) == ["100usd/1d", "10usd/1h"]
    table = cli("limits").out
    assert "budget:agent[claude] = 10usd/1h" in table
    assert "budget:agent[claude] = 100usd/1d" in table

    left = ok(cli("--json", "limits", "--set", "budget:agent[claude]=none/1h"))["budgets"]
    assert [b["budget"] for b in left] == ["100usd/1d"]


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("budget:agent[claude]=50eur/1d", "not a budget amount"),
        ("budget:agent[claude]=50usd", "AMOUNT/PERIOD"),
        ("budget:agent[claude]=0usd/1d", "more than 0"),
        ("budget:agent[claude]=5usd/0s", "more than 0s"),
        ("budget:colour=5usd/1d", "unknown rate key"),
        ("budget:global[x]=5usd/1d", "takes no [VALUE]"),
    ],
)
def test_a_bad_budget_is_refused_and_nothing_is_applied(
    cli: Run, assignment: str, message: str
) -> None:
    result = cli("limits", "--set", "budget:user=1usd/1h", "--set", assignment)
    assert result.code == 2
    assert message in result.error_line()
    assert ok(cli("--json", "limits"))["budgets"] == []


def test_status_ls_and_show_say_why_a_task_waits_and_until_when(cli: Run, store: Store) -> None:
    # Given: claude may spend $1 an hour, one run has spent $1.50
    ok(
        cli(
            "--json", "limits", "--set", "budget:agent[claude]=1usd/1h", "--set", "max_concurrent=1"
        )
    )
    submit(cli, "--agent", "claude", "--", "true")
    waiting = submit(cli, "--agent", "claude", "--", "true")
    (claimed,) = store.claim("test-node").claims
    attempt = claimed.attempt
    store.finish(attempt.id, attempt.token, 0, usage=Usage(cost_usd=1.5))

    # Then: every read says why the second waits and when it may start
    status = ok(cli("--json", "status"))
    (budget,) = status["budgets"]
    assert (budget["value"], budget["spent"], budget["budget"]) == ("claude", 1.5, "1usd/1h")
    assert budget["until"] == pytest.approx(attempt.started_at + 3600, abs=60)
    assert status["queued"][0]["id"] == waiting["id"]
    reason = status["queued"][0]["status_reason"]
    assert reason.startswith("budget agent[claude] 1usd/1h reached ($1.50 spent); may start at ")
    # The reason gives the second (rounded up), budget_until the exact time, for scripts.
    said = reason.rpartition("may start at ")[2]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", said), said
    exact = datetime.fromisoformat(status["queued"][0]["budget_until"]).timestamp()
    assert datetime.fromisoformat(said).timestamp() == math.ceil(exact)
    text = cli("status").out
    assert "BUDGET REACHED agent[claude] 1usd/1h: $1.50 spent · starts again in 60m" in text
    assert "budget agent[claude] 1usd/1h reached" in text
    listed = ok(cli("--json", "ls", "--status", "queued"))
    rows = listed["tasks"] if isinstance(listed, dict) else listed
    assert [t["status_reason"] for t in rows] == [reason]
    assert ok(cli("--json", "show", waiting["id"]))["status_reason"] == reason
    assert "budget agent[claude] 1usd/1h reached" in cli("show", waiting["id"]).out


@pytest.mark.parametrize("assignment", ["budget:global=100usd/1d", "rate:global=1000/1d"])
def test_a_global_budget_or_rate_lets_submit_and_every_read_work(
    cli: Run, store: Store, assignment: str
) -> None:
    # Given: a budget or rate over every task, and a task in line (one running)
    ok(cli("--json", "limits", "--set", assignment, "--set", "max_concurrent=1"))
    submit(cli, "--expected-duration", "60")
    claim_one(store)

    # When: another task is submitted
    result = cli("submit", "--expected-duration", "60", "--", "true")

    # Then: it is submitted once, with its place and estimate, and every read works
    assert result.code == 0, result.err
    assert re.fullmatch(
        r"submitted [0-9a-f]{8}: queued, position 1 \(NEXT UP\), starts .+\n", result.out
    )
    assert len(store.list_tasks()) == 2
    queued = ok(cli("--json", "status"))["queued"]
    assert [t["eta_unavailable"] for t in queued] == [None]
    assert queued[0]["eta_start"] is not None
    assert ok(cli("--json", "show", queued[0]["id"]))["position"] == 1
    assert cli("ls").code == 0
