"""The CLI against hostile input and narrow terminals: control characters shown escaped,
ids and state columns kept at 80 columns, numbers out of range refused with a clear
error, prompts that would be options refused, dashed UUIDs accepted."""

from __future__ import annotations

import importlib
import re
import uuid
from pathlib import Path

from rich.console import Console

from slotline import stats as queue_stats
from slotline.cli.detail import task_detail
from slotline.cli.render import limits_table, queue_status, task_table
from slotline.cli.top_view import View, render
from slotline.clock import utcnow
from slotline.store import Store

from .conftest import Run, claim_one, ok

HOSTILE = "evil\x1b]0;pwned\x07\x1b[2J\u202etxt.exe" + " and a very long title" * 8
LONG_WS = "/srv/" + "deep/" * 30 + "ws"


def rendered(renderable: object, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def assert_escaped(text: str) -> None:
    assert "\x1b" not in text
    assert "\x07" not in text
    assert "\u202e" not in text
    assert "\\x1b" in text


def test_ls_status_show_and_top_escape_control_characters(cli: Run, store: Store) -> None:
    task = store.submit({"command": ["true"], "title": HOSTILE, "labels": {"k": "v\x1b[31m"}})
    running = store.submit({"command": ["true"], "title": "\x1b[2Jrunning"})
    claim_one(store)
    for args in (("ls",), ("status",), ("show", task.id), ("show", running.id)):
        result = cli(*args)
        assert result.code == 0, result.err
        assert_escaped(result.out)
    assert "v\\x1b[31m" in cli("show", task.id).out
    view = View(status=store.status(), now=utcnow(), height=40, selected=None, usage={})
    assert_escaped(rendered(render(view), 120))


def test_ls_at_80_columns_keeps_every_state_column(cli: Run, store: Store) -> None:
    tasks = [store.submit({"command": ["true"], "title": HOSTILE, "agent": "claude"})]
    tasks.append(store.submit({"command": ["true"], "title": "short"}))
    for width in ("80", "120"):
        out = cli("ls", env={"COLUMNS": width}).out
        header = out.splitlines()[0]
        for column in ("ID", "STATUS", "PRI", "POS", "TITLE", "AGENT", "AGE"):
            assert re.search(rf"\b{column}\b", header), (width, header)
        for task in tasks:
            assert task.id[:8] in out
        assert "queued" in out
        assert "claude" in out
        assert max(len(line) for line in out.splitlines()) <= int(width)
    table = rendered(task_table(store.list_tasks(), utcnow()))
    assert all(re.search(rf"\b{c}\b", table) for c in ("ID", "STATUS", "PRI", "POS", "AGE"))
    status = rendered(queue_status(store.status(), store.counts(), utcnow(), None))
    assert "NEXT UP" in status
    assert tasks[0].id[:8] in status


def test_limits_and_stats_at_80_columns_keep_their_numbers(cli: Run, store: Store) -> None:
    store.set_limit("workspace", LONG_WS, 7)
    for _ in range(2):
        store.submit({"command": ["true"], "agent": "a-rather-long-agent-name-here"})
    claim_one(store)
    out = cli("limits", env={"COLUMNS": "80"}).out
    assert re.search(r"workspace\[/srv/deep.*…\s+7\s", out), out
    assert "MAX" in out.splitlines()[0]
    table = rendered(limits_table(store.settings()))
    assert re.search(r"…\s+7\s", table)
    stats = cli("stats", env={"COLUMNS": "80"}).out
    for column in ("ALL", "RUN", "QUEUED", "OK", "FAIL", "WAIT", "TOOK", "P50", "P95"):
        assert column in stats
    assert max(len(line) for line in stats.splitlines()) <= 80
    render_stats = importlib.import_module("slotline.cli.stats").render
    text = rendered(render_stats(queue_stats.compute(store.list_tasks(), utcnow())))
    assert "TOOK" in text


def test_a_listing_shows_prefixes_long_enough_to_tell_ids_apart(store: Store) -> None:
    # Given many tasks, two ids that share 8 digits are shown with more.
    from slotline.cli.render import short_ids

    ids = ["abcdef0123", "abcdef0199", "12345678ff"]
    assert short_ids(ids) == {"abcdef0123": "abcdef0123", "abcdef0199": "abcdef0199",
                              "12345678ff": "12345678ff"}  # fmt: skip
    assert short_ids(["abcdef01" + "0" * 24, "12345678" + "0" * 24]) == {
        "abcdef01" + "0" * 24: "abcdef01",
        "12345678" + "0" * 24: "12345678",
    }
    task = store.submit({"command": ["true"], "title": "x"})
    assert task.id[:8] in rendered(task_detail(task, utcnow()))


def test_numbers_out_of_range_are_clear_errors(cli: Run) -> None:
    for args in (
        ("events", "--since", "99999999999999999999999"),
        ("limits", "--set", "max_concurrent=" + "9" * 30),
        ("limits", "--set", "aging_interval=1e309"),
        ("limits", "--set", "agent[claude]=" + "9" * 30),
        ("submit", "--timeout", "1e999", "--", "true"),
        ("submit", "--ttl", "1e999", "--", "true"),
    ):
        result = cli(*args)
        assert result.code != 0, args
        assert "OverflowError" not in result.err, args
        assert "Traceback" not in result.err, args
        assert re.search(r"between|range|finite|at most|less than|too large", result.err), (
            result.err
        )
    assert ok(cli("--json", "ls")) == []


def test_a_prompt_that_would_be_an_option_is_refused(cli: Run, tmp_path: Path) -> None:
    config = tmp_path / "agents.yaml"
    config.write_text("agents:\n  gitlog:\n    command: [git, log, '{prompt}']\n")
    result = cli("--config", str(config), "submit", "--agent", "gitlog", "--prompt=--output=/x")
    assert result.code != 0
    assert "must not start with '-'" in result.err
    assert ok(cli("--json", "ls")) == []


def test_a_dashed_uuid_is_an_id_for_the_cli(cli: Run, store: Store) -> None:
    task = store.submit({"command": ["true"], "title": "x"})
    dashed = str(uuid.UUID(task.id))
    assert ok(cli("--json", "show", dashed))["id"] == task.id
    assert ok(cli("--json", "hold", dashed))["status"] == "held"
