"""`slotline limits`: reading, `--set KEY=N` parsing and its errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .conftest import Run, ok


def test_limits_set_parses_every_key_form(cli: Run) -> None:
    result = ok(
        cli(
            "--json", "limits",
            "--set", "agent[claude]=2", "--set", "workspace=1", "--set", "label:team[infra]=1",
            "--set", "user=3", "--set", "max_concurrent=5", "--set", "workspace[/srv/a=b]=4",
        )
    )  # fmt: skip
    assert result["max_concurrent"] == 5
    limits = {(lim["key"], lim["value"]): lim["max"] for lim in result["limits"]}
    assert limits == {
        ("agent", "claude"): 2,
        ("workspace", None): 1,
        ("label:team", "infra"): 1,
        ("user", None): 3,
        ("workspace", "/srv/a=b"): 4,
    }
    removed = ok(cli("--json", "limits", "--set", "user=none", "--set", "agent[claude]=NONE"))
    assert {(lim["key"], lim["value"]) for lim in removed["limits"]} == {
        ("workspace", None),
        ("label:team", "infra"),
        ("workspace", "/srv/a=b"),
    }
    table = cli("limits").out
    assert re.search(r"^max_concurrent\s+5\s", table, re.MULTILINE)
    assert re.search(r"^label:team\[infra\]\s+1\s", table, re.MULTILINE)
    assert re.search(r"^workspace\s+1\s", table, re.MULTILINE)
    assert re.search(r"^max_queued_per_user\s+none\s", table, re.MULTILINE)
    bounded = ok(cli("--json", "limits", "--set", "max_queued_per_user=4"))
    assert bounded["max_queued_per_user"] == 4
    unbounded = ok(cli("--json", "limits", "--set", "max_queued_per_user=none"))
    assert unbounded["max_queued_per_user"] is None


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("agent=x", "agent must be a whole number or none"),
        ("agent=-1", "agent must be 0 or more"),
        ("agent[]=1", "empty value"),
        ("colour=1", "unknown limit 'colour'"),
        ("label:=1", "unknown limit 'label:'"),
        ("max_concurrent=none", "max_concurrent cannot be none"),
        ("max_concurrent[x]=1", "max_concurrent takes no [VALUE]"),
        ("agent", "is not KEY=N"),
        ("=3", "is not KEY=N"),
    ],
)
def test_limits_set_errors(cli: Run, assignment: str, message: str) -> None:
    result = cli("limits", "--set", "workspace=1", "--set", assignment)
    assert result.code == 2
    assert message in result.error_line()
    # Nothing is applied when any --set is malformed.
    assert ok(cli("--json", "limits"))["limits"] == []


def test_limits_refused_by_the_store_exits_1(cli: Run) -> None:
    result = cli("--json", "limits", "--set", "aging_interval=0.5")
    assert result.code == 1
    assert json.loads(result.error_line())["type"] == "InvalidInput"


def test_limits_workspace_value_is_made_absolute_like_submit_does(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    task = ok(cli("--json", "submit", "--workspace", "repo", "--", "true"))
    result = ok(cli("--json", "limits", "--set", "workspace[repo]=2"))
    assert result["limits"] == [
        {"key": "workspace", "value": task["workspace"], "max": 2, "origin": "api"}
    ]
