"""The `slotline` CLI: submit, reading commands, store selection, errors and `serve`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slotline.store import Store

from .conftest import (
    ATTEMPT_FIELDS,
    COMMANDS,
    ISO_UTC,
    STATUS_FIELDS,
    TASK_FIELDS,
    Run,
    claim_one,
    ok,
    submit,
)

# -- basics -----------------------------------------------------------------------------


def test_version(cli: Run) -> None:
    result = cli("--version")
    assert result.code == 0
    assert "0.1.0" in result.out


def test_help_lists_every_command(cli: Run) -> None:
    result = cli("--help")
    assert result.code == 0
    for name in COMMANDS:
        assert re.search(rf"^\s+{name}\s", result.out, re.MULTILINE), name


def test_no_command_shows_the_help(cli: Run) -> None:
    result = cli()
    assert result.code == 2
    assert "Usage: slotline" in result.err
    assert "Commands:" in result.err


def test_submit_prints_short_id_status_and_position(cli: Run) -> None:
    first = cli("submit", "--", "echo", "one")
    second = cli("submit", "--", "echo", "two")
    assert first.code == 0
    # Both can start as soon as a node looks, and no node serves the store: each says so.
    nobody = " — no live node serves this store: start one with `slotline serve`\n"
    assert re.fullmatch(
        r"submitted [0-9a-f]{8}: queued, position 1 \(NEXT UP\), starts now" + re.escape(nobody),
        first.out,
    )
    assert re.fullmatch(
        r"submitted [0-9a-f]{8}: queued, position 2, starts now" + re.escape(nobody), second.out
    )


def test_submit_with_a_memory_cap_says_where_nodes_cannot_enforce_it(cli: Run) -> None:
    # Where RLIMIT_AS is not enforced (macOS; Linux with the portable switch), at submit:
    capped = cli("submit", "--memory-mb", "64", "--", "true", env={"SLOTLINE_PORTABLE": "1"})
    assert capped.code == 0
    assert capped.err == (
        f"warning: memory cap of 64 MB not enforced: this platform ({sys.platform}) has "
        "no enforced RLIMIT_AS: a node on this machine runs it uncapped (a node on Linux "
        "caps it)\n"
    )
    if sys.platform.startswith("linux"):  # where it is enforced, nothing to say
        enforced = cli("submit", "--memory-mb", "64", "--", "true", env={"SLOTLINE_PORTABLE": "0"})
        assert (enforced.code, enforced.err) == (0, "")


def test_submit_json_is_the_task_with_every_contract_field(cli: Run, tmp_path: Path) -> None:
    task = submit(cli, "--", "sh", "-c", "echo $HOME; exit 3", "--json", "*")
    assert task.keys() >= TASK_FIELDS
    assert re.fullmatch(r"[0-9a-f]{32}", task["id"])
    # The argv is kept exactly as given: no shell, no globbing, options after `--` included.
    assert task["command"] == ["sh", "-c", "echo $HOME; exit 3", "--json", "*"]
    assert task["status"] == "queued"
    assert task["priority"] == "normal"
    assert task["boosted"] is False
    assert task["position"] == 1
    assert task["depends_on"] == []
    assert ISO_UTC.match(task["created_at"])
    assert task["started_at"] is None
    assert task["finished_at"] is None
    assert task["exit_code"] is None
    assert task["failure_reason"] is None
    assert task["attempts"] == []
    assert task["workspace"] == str(tmp_path.resolve())


def test_submit_records_every_option(cli: Run, store: Store, tmp_path: Path) -> None:
    parent = submit(cli)
    dep = submit(cli)
    (tmp_path / "repo").mkdir()
    task = submit(
        cli,
        "--priority", "high", "--title", "fix the flaky test", "--agent", "claude",
        "--workspace", "repo", "--user", "ana", "--label", "team=infra", "--label", "k=a=b",
        "--env", "MODE=fast", "--after", dep["id"][:6], "--parent", parent["id"][:6],
        "--timeout", "10m", "--ttl", "90", "--max-attempts", "3",
        "--", "claude", "-p", "fix it",
    )  # fmt: skip
    assert task["title"] == "fix the flaky test"
    assert task["priority"] == "high"
    assert task["agent"] == "claude"
    assert task["workspace"] == str((tmp_path / "repo").resolve())
    assert task["user"] == "ana"
    assert task["labels"] == {"team": "infra", "k": "a=b"}
    assert task["depends_on"] == [dep["id"]]
    assert task["status"] == "waiting"
    assert task["position"] is None
    assert task["parent_id"] == parent["id"]
    assert task["timeout"] == 600
    assert task["queue_ttl"] == 90
    assert task["max_attempts"] == 3
    assert task["command"] == ["claude", "-p", "fix it"]
    # env is not part of the JSON shape (it may hold secrets), but it is stored.
    assert store.get(task["id"]).env == {"MODE": "fast"}


def test_submit_hold_and_parent_from_environment(cli: Run) -> None:
    parent = submit(cli)
    result = cli("--json", "submit", "--hold", "--", "true", env={"SLOTLINE_TASK_ID": parent["id"]})
    task = ok(result)
    assert task["status"] == "held"
    assert task["position"] is None
    assert task["parent_id"] == parent["id"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [("P0", "urgent"), ("p1", "high"), ("medium", "normal"), ("P3", "low"), ("HIGH", "high")],
)
def test_priority_aliases(cli: Run, given: str, expected: str) -> None:
    assert submit(cli, "--priority", given)["priority"] == expected


@pytest.mark.parametrize(
    "args",
    [
        ("submit", "--priority", "P9", "--", "true"),
        ("submit", "--timeout", "soon", "--", "true"),
        ("submit", "--ttl", "0", "--", "true"),
        ("submit", "--label", "novalue", "--", "true"),
        ("submit", "--env", "=x", "--", "true"),
        ("submit", "--max-attempts", "0", "--", "true"),
        ("submit",),
        ("ls", "--status", "sleeping"),
        ("frobnicate",),
        ("move", "abc"),
    ],
)
def test_bad_usage_exits_2_with_one_line(cli: Run, args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.code == 2
    assert result.error_line().startswith("error: ")
    assert result.out == ""


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ("submit", "--timeout", "1e20", "--", "true"),
            "'--timeout': must be more than 0 seconds and at most 10 years, got 1e+20",
        ),
        (
            ("submit", "--in", "1e20", "--", "true"),
            "'--in': must be more than 0 seconds and at most 10 years, got 1e+20",
        ),
        (
            ("submit", "--max-attempts", "1000", "--", "true"),
            "'--max-attempts': must be between 1 and 100, got 1000",
        ),
        (
            ("submit", "--memory-mb", "99999999999", "--", "true"),
            "'--memory-mb': must be between 1 MiB and 16 TiB, got 99999999999",
        ),
        (
            ("ls", "--limit", "9" * 30),
            "'--limit' / '-n': is too large, got 999999999999999999999...",
        ),
        (("move", "abc", "--to", "0"), "'--to': must be at least 1, got 0"),
    ],
)
def test_a_number_out_of_bounds_is_refused_saying_the_bound_in_words(
    cli: Run, args: tuple[str, ...], said: str
) -> None:
    result = cli(*args)
    assert result.code == 2
    assert said in result.error_line()


def test_a_setting_out_of_bounds_is_refused_saying_the_bound_in_words(cli: Run) -> None:
    result = cli("limits", "--set", "max_concurrent=99999999999")
    assert result.code == 1
    assert result.error_line() == (
        "error: max_concurrent must be between 0 and 1,000,000,000, got 99999999999"
    )


def test_submit_refused_by_the_store_exits_1(cli: Run) -> None:
    unknown = cli("submit", "--after", "abcdef", "--", "true")
    assert unknown.code == 1
    assert unknown.error_line() == "error: unknown dependency 'abcdef': no such task"
    bad_env = cli("submit", "--env", "1X=2", "--", "true")
    assert bad_env.code == 1
    assert "1X" in bad_env.error_line()
    assert ok(cli("--json", "ls")) == []


# -- reading ----------------------------------------------------------------------------


def test_queue_order_positions_and_next_up(cli: Run) -> None:
    low = submit(cli, "-p", "low")
    normal = submit(cli)
    urgent = submit(cli, "-p", "urgent")
    high = submit(cli, "-p", "P1")
    status = ok(cli("--json", "status"))
    assert status.keys() >= STATUS_FIELDS
    order = [t["id"] for t in status["queued"]]
    assert order == [urgent["id"], high["id"], normal["id"], low["id"]]
    assert [t["position"] for t in status["queued"]] == [1, 2, 3, 4]
    assert all(t.keys() >= TASK_FIELDS for t in status["queued"])
    assert status["next_up"] == urgent["id"]
    assert status["active"] == 0
    assert status["max_concurrent"] == 3
    assert status["slots_available"] == 3
    assert status["at_capacity"] is False
    assert status["paused"] is False
    assert status["running"] == []

    human = cli("status")
    assert human.code == 0
    assert "0/3 running" in human.out
    assert "3 slots available" in human.out
    (next_up_line,) = [line for line in human.out.splitlines() if "NEXT UP" in line]
    assert urgent["id"][:8] in next_up_line
    assert next_up_line.split()[0] == "1"


def test_status_with_running_task_and_at_capacity(cli: Run, store: Store) -> None:
    first = submit(cli, "--title", "the running one")
    second = submit(cli)
    assert claim_one(store) == first["id"]
    status = ok(cli("--json", "status"))
    assert status["active"] == 1
    assert status["max_concurrent"] == 1
    assert status["slots_available"] == 0
    assert status["at_capacity"] is True
    assert [t["id"] for t in status["running"]] == [first["id"]]
    assert [t["position"] for t in status["queued"]] == [1]
    assert status["queued"][0]["id"] == second["id"]
    running = status["running"][0]
    assert running["status"] == "running"
    assert running["position"] is None
    assert ISO_UTC.match(running["started_at"])
    (attempt,) = running["attempts"]
    assert attempt.keys() >= ATTEMPT_FIELDS
    assert attempt["number"] == 1
    assert attempt["over_limit"] is False
    assert attempt["finished_at"] is None

    human = cli("status").out
    assert "1/1 running" in human
    assert "0 slots available" in human
    assert "AT CAPACITY" in human
    assert "the running one" in human


def test_ls_table_and_status_filter(cli: Run, store: Store) -> None:
    running = submit(cli, "--title", "alpha task", "--agent", "claude")
    queued = submit(cli, "--title", "beta task")
    claim_one(store)
    table = cli("ls")
    assert table.code == 0
    header = table.out.splitlines()[0].split()
    assert header == [
        "ID",
        "STATUS",
        "PRI",
        "POS",
        "TITLE",
        "AGENT",
        "AGE",
        "ETA",
        "WHY",
        "NOT",
        "NOW",
    ]
    (alpha,) = [line for line in table.out.splitlines() if running["id"][:8] in line]
    assert alpha.split()[:3] == [running["id"][:8], "running", "normal"]
    assert "claude" in alpha
    assert "ago" in alpha
    (beta,) = [line for line in table.out.splitlines() if queued["id"][:8] in line]
    assert beta.split()[:4] == [queued["id"][:8], "queued", "normal", "1"]

    only_queued = ok(cli("--json", "ls", "--status", "queued"))
    assert [t["id"] for t in only_queued] == [queued["id"]]
    assert only_queued[0]["position"] == 1
    everything = ok(cli("ls", "--json"))
    assert [t["id"] for t in everything] == [running["id"], queued["id"]]
    assert cli("ls", "--status", "failed").out == "no tasks failed\n"


def test_ls_filters_and_pages_after_the_last_task_shown(cli: Run, store: Store) -> None:
    made = [
        store.submit({"command": ["true"], "title": f"task {i}", "labels": {"n": str(i % 2)}})
        for i in range(5)
    ]
    first = cli("--json", "ls", "--limit", "2", "--newest")
    assert [t["id"] for t in ok(first)] == [made[4].id, made[3].id]
    rest = ok(cli("--json", "ls", "--newest", "--after", made[3].id))
    assert [t["id"] for t in rest] == [t.id for t in reversed(made[:3])]
    table = cli("ls", "-n", "2", "--label", "n=0")
    assert made[0].id[:8] in table.out
    assert f"more: slotline ls --after {made[2].id}" in table.err
    assert [t["title"] for t in ok(cli("--json", "ls", "-q", "TASK 3"))] == ["task 3"]
    unknown = cli("ls", "--after", "f" * 32)
    assert unknown.code == 1
    assert "no task" in unknown.err
    assert cli("ls", "--limit", "0").code == 2
    too_long = cli("ls", "--agent", "a" * 300)
    assert too_long.code == 2
    assert "agent" in too_long.err


def test_show_accepts_a_unique_prefix(cli: Run, store: Store) -> None:
    task = submit(cli, "--title", "show me [bold]literally[/bold]")
    shown = ok(cli("--json", "show", task["id"][:5]))
    assert task.pop("deduplicated") is False  # the submit's answer, not the task's
    assert shown == task | {"position": 1}
    human = cli("show", task["id"][:5])
    assert human.code == 0
    assert task["id"] in human.out
    assert "show me [bold]literally[/bold]" in human.out
    assert "position 1, NEXT UP" in human.out


def test_ambiguous_and_unknown_ids(cli: Run, store: Store) -> None:
    ids = [store.submit({"command": ["true"]}).id for _ in range(17)]
    # Seventeen ids over sixteen hex digits: some first digit is shared.
    first_digits = [i[0] for i in ids]
    shared = next(d for d in first_digits if first_digits.count(d) > 1)
    ambiguous = cli("show", shared)
    assert ambiguous.code == 1
    assert (
        ambiguous.error_line() == f"error: {shared!r} matches several tasks; give more characters"
    )
    missing = cli("--json", "cancel", "f" * 31 + "x")
    assert missing.code == 1
    assert json.loads(missing.error_line())["type"] == "InvalidInput"
    unknown = cli("--json", "show", "0" * 32)
    assert unknown.code == 1
    assert unknown.out == ""
    assert json.loads(unknown.error_line()) == {
        "error": f"no task matches {'0' * 32!r}",
        "type": "NotFound",
    }


def test_events_lines_json_and_since(cli: Run) -> None:
    task = submit(cli)
    ok(cli("--json", "hold", task["id"]))
    ok(cli("--json", "release", task["id"]))
    events = ok(cli("--json", "events"))
    assert [e["kind"] for e in events] == ["submitted", "held", "released"]
    assert [e["seq"] for e in events] == sorted({e["seq"] for e in events})
    assert all(ISO_UTC.match(e["at"]) and e["task_id"] == task["id"] for e in events)
    assert events[1]["data"] == {"from": "queued", "to": "held"}
    after = ok(cli("--json", "events", "--since", str(events[0]["seq"]), "--limit", "1"))
    assert [e["kind"] for e in after] == ["held"]
    latest = ok(cli("--json", "events", "--limit", "1"))
    assert [e["kind"] for e in latest] == ["released"]
    lines = cli("events").out.splitlines()
    assert len(lines) == 3
    assert "held" in lines[1]
    assert task["id"][:8] in lines[1]


# -- store selection and errors -----------------------------------------------------------


def test_store_from_env_and_flag(cli: Run, tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    in_env = submit(cli)
    in_flag = ok(cli("--store", str(other), "--json", "submit", "--", "true"))
    assert [t["id"] for t in ok(cli("--json", "ls"))] == [in_env["id"]]
    assert [t["id"] for t in ok(cli("--store", f"sqlite://{other}", "--json", "ls"))] == [
        in_flag["id"]
    ]
    default = cli("--json", "ls", env={"SLOTLINE_STORE": None})
    assert ok(default) == []
    assert (tmp_path / "xdg" / "slotline" / "slotline.db").exists()


def test_json_errors_go_to_stderr_as_one_object(cli: Run) -> None:
    usage = cli("--json", "submit", "--priority", "later", "--", "true")
    assert usage.code == 2
    assert usage.out == ""
    error = json.loads(usage.error_line())
    assert error["type"] == "BadParameter"
    assert "later" in error["error"]
    bad_store = cli("--json", "--store", "mysql://db", "status")
    assert bad_store.code == 1
    assert json.loads(bad_store.error_line())["type"] == "InvalidInput"


# -- serve ------------------------------------------------------------------------------


def test_serve_runs_tasks_and_stops_cleanly_on_sigterm(
    base_env: dict[str, str], store: Store, tmp_path: Path
) -> None:
    done = store.submit({"command": ["sh", "-c", "exit 0"], "workspace": str(tmp_path)})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "slotline",
            "serve",
            "--no-http",
            "--max-concurrent",
            "2",
            "--node-id",
            "e2e",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=base_env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "max_concurrent 2" in line
        assert str(tmp_path / "store.db") in line
        assert store.settings()["max_concurrent"] == 2
        deadline = time.monotonic() + 30
        while store.get(done.id).status.value != "succeeded":
            assert time.monotonic() < deadline, "the node did not run the task"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_events_follow_prints_new_events_until_interrupted(
    cli: Run, base_env: dict[str, str], tmp_path: Path
) -> None:
    old = submit(cli)
    proc = subprocess.Popen(
        [sys.executable, "-m", "slotline", "events", "--follow", "--json", "--limit", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=base_env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert (first["kind"], first["task_id"]) == ("submitted", old["id"])
        new = submit(cli)
        second = json.loads(proc.stdout.readline())
        assert (second["kind"], second["task_id"]) == ("submitted", new["id"])
        assert second["seq"] > first["seq"]
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
