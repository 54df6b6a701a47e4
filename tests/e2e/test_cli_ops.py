"""The operator commands on a store with no node: logs, stats, export, redrive, config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotline.clock import utcnow
from slotline.models import Status
from slotline.store import Claim, Store

from .conftest import ISO_UTC, Run, ok


def put(store: Store, agent: str | None = None, **fields: object) -> str:
    """Submit `true` through the store (setup is quicker than through the CLI)."""
    return store.submit({"command": ["true"], "agent": agent, **fields}).id


def run_once(store: Store, log: Path | None, exit_code: int, output: str = "") -> Claim:
    """Claim the next task as a node would, "run" it (write its log), record its end."""
    (claim,) = store.claim("test-node").claims
    if log is not None:
        log.write_text(output)
    store.record_start(
        claim.attempt.id, claim.attempt.token, pid=None, log_path=None if log is None else str(log)
    )
    store.finish(claim.attempt.id, claim.attempt.token, exit_code)
    return claim


# -- logs ---------------------------------------------------------------------------------


def test_logs_of_a_task_not_started_is_a_clear_error(cli: Run, store: Store) -> None:
    task = put(store)
    result = cli("logs", task)
    assert result.code == 1
    line = result.error_line()
    assert f"task {task[:8]} has no log yet: it is queued, position 1" in line
    assert "logs -f" in line


def test_logs_prints_the_latest_attempt_or_the_one_asked(
    cli: Run, store: Store, tmp_path: Path
) -> None:
    task = put(store)
    run_once(store, tmp_path / "1.log", 1, "first run\n")
    store.restart(task)
    run_once(store, tmp_path / "2.log", 0, "second run\nwith two lines\n")

    latest = cli("logs", task[:6])
    assert (latest.code, latest.out) == (0, "second run\nwith two lines\n")
    first = cli("logs", task, "--attempt", "1")
    assert (first.code, first.out) == (0, "first run\n")
    missing = cli("logs", task, "--attempt", "3")
    assert missing.code == 1
    assert "has no attempt 3; it has 2" in missing.error_line()


def test_logs_says_when_the_file_is_gone_or_was_never_written(
    cli: Run, store: Store, tmp_path: Path
) -> None:
    gone = put(store)
    run_once(store, tmp_path / "gone.log", 0)
    (tmp_path / "gone.log").unlink()
    result = cli("logs", gone)
    assert result.code == 1
    assert f"the log of attempt 1 of task {gone[:8]} is missing" in result.error_line()
    assert "node test-node" in result.error_line()

    never = put(store)
    run_once(store, None, 0)
    assert "has no log file" in cli("logs", never).error_line()


# -- stats --------------------------------------------------------------------------------


def test_stats_counts_states_and_times_each_agent_type(
    cli: Run, store: Store, tmp_path: Path
) -> None:
    # Given two claude runs and one without an agent that ended, one running, one queued,
    for agent in ("claude", "claude", None):
        put(store, agent)
        run_once(store, None, 0 if agent else 2)
    put(store, "aider")
    store.claim("test-node")
    put(store)

    stats = ok(cli("--json", "stats"))

    assert stats["total"] == 5
    assert ISO_UTC.match(stats["at"])
    counts = stats["counts"]
    assert (counts["succeeded"], counts["failed"], counts["running"], counts["queued"]) == (
        2,
        1,
        1,
        1,
    )
    agents = {a["agent"]: a for a in stats["agents"]}
    assert list(agents) == ["-", "aider", "claude"]
    claude = agents["claude"]
    assert (claude["tasks"], claude["counts"]) == (2, {"succeeded": 2})
    assert (claude["wait"]["count"], claude["run"]["count"]) == (2, 2)
    assert 0 <= claude["run"]["p50"] <= claude["run"]["p95"]
    assert agents["aider"]["run"] == {"count": 0, "avg": None, "p50": None, "p95": None}
    assert agents["-"]["counts"] == {"failed": 1, "queued": 1}
    assert stats["throughput"]["finished"] == stats["throughput"]["finished_last_hour"] == 3

    table = cli("stats")
    assert table.code == 0
    assert "5 tasks: 1 queued, 1 running, 2 succeeded, 1 failed" in table.out
    assert "claude" in table.out
    assert "WAIT    P50    P95" in table.out
    assert "throughput: 0.05/min in the last hour (3 ended)" in table.out


# -- export -------------------------------------------------------------------------------


def test_export_is_the_whole_state_and_can_go_to_a_file(
    cli: Run, store: Store, tmp_path: Path
) -> None:
    store.set_limit("agent", "claude", 2)
    ran = put(store, env={"TOKEN": "secret"})
    run_once(store, tmp_path / "1.log", 0)
    queued = put(store)

    data = ok(cli("export"))

    assert data["last_seq"] == store.last_seq()
    assert data["store"] == f"sqlite:///{tmp_path / 'store.db'}"
    assert data["settings"]["max_concurrent"] == 1
    assert data["settings"]["limits"] == [
        {"key": "agent", "value": "claude", "max": 2, "origin": "api"}
    ]
    assert data["counts"]["succeeded"] == data["counts"]["queued"] == 1
    assert data["status"]["queued"] == [queued]
    assert data["status"]["next_up"] == queued
    tasks = {t["id"]: t for t in data["tasks"]}
    assert tasks.keys() == {ran, queued}
    assert tasks[ran]["attempts"][0]["log_path"] == str(tmp_path / "1.log")
    assert "secret" not in json.dumps(data)

    target = tmp_path / "state.json"
    written = ok(cli("--json", "export", "--output", str(target)))
    assert written == {"output": str(target), "tasks": 2, "last_seq": data["last_seq"]}
    assert json.loads(target.read_text())["tasks"] == data["tasks"]
    nowhere = cli("export", "-o", str(tmp_path / "no" / "such" / "dir.json"))
    assert nowhere.code == 1
    assert "dir.json" in nowhere.error_line()


# -- redrive ------------------------------------------------------------------------------


@pytest.fixture
def failures(store: Store) -> dict[str, str]:
    """Failed tasks: claude with exit 2, aider with exit 3, claude that failed 2 days ago,
    and a succeeded one."""
    store.set_setting("max_concurrent", 10)
    agents = {"claude": "claude", "aider": "aider", "old": "claude", "ok": "claude"}
    ids = {name: put(store, agent) for name, agent in agents.items()}
    claims = {c.task.id: c.attempt for c in store.claim("test-node").claims}
    for name, code in (("claude", 2), ("aider", 3), ("old", 2), ("ok", 0)):
        attempt = claims[ids[name]]
        when = utcnow() - 2 * 86400 if name == "old" else None
        store.finish(attempt.id, attempt.token, code, now=when)
    return ids


def test_redrive_dry_run_lists_matches_and_changes_nothing(
    cli: Run, store: Store, failures: dict[str, str]
) -> None:
    result = ok(cli("--json", "redrive", "--agent", "claude", "--dry-run"))
    assert result["dry_run"] is True
    assert set(result["matched"]) == {failures["claude"], failures["old"]}
    assert result["restarted"] == []
    assert len(store.list_tasks(Status.FAILED)) == 3
    table = cli("redrive", "--dry-run", "--agent", "claude")
    assert "would restart 2 failed tasks" in table.out
    assert failures["old"][:8] in table.out


def test_redrive_restarts_only_the_failed_tasks_matching_every_filter(
    cli: Run, store: Store, failures: dict[str, str]
) -> None:
    filters = ("--agent", "claude", "--since", "1h", "--reason-contains", "CODE 2")
    result = ok(cli("--json", "redrive", *filters))
    assert result["matched"] == result["restarted"] == [failures["claude"]]
    assert store.get(failures["claude"]).status is Status.QUEUED
    still_failed = {t.id for t in store.list_tasks(Status.FAILED)}
    assert still_failed == {failures["aider"], failures["old"]}

    rest = cli("redrive")
    assert rest.out == "restarted 2 of 2 failed tasks\n"
    assert cli("redrive").out == "no failed task matches; nothing restarted\n"


# -- config -------------------------------------------------------------------------------


def test_config_prints_the_effective_configuration(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text(
        "max_concurrent: 5\nagents:\n  claude:\n    command: [claude, -p, '{prompt}']\n"
    )
    data = ok(cli("--json", "config", "--config", str(path), env={"SLOTLINE_MAX_DEPTH": "2"}))
    assert (data["max_concurrent"], data["max_depth"]) == (5, 2)
    assert data["agents"]["claude"]["command"] == ["claude", "-p", "{prompt}"]
    text = cli("config", cwd=tmp_path)  # ./slotline.yaml is found by default
    assert text.out.startswith(f"# read from {path}")
    assert "max_concurrent: 5\n" in text.out

    path.write_text("max_concurrent: 5\nagents:\n  claude:\n    command: []\n")
    bad = cli("config", "--config", str(path))
    assert bad.code == 1
    assert f"{path}:4: agents.claude.command" in bad.error_line()
