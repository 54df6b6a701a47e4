"""slotline.yaml found from a project's subfolder by every command, `serve` and the CLI
alike, and by a node started with `scripts/serve` from the caller's folder."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from overlap import peak
from waiting import until

from .conftest import API_READY, Lines, Run, ok

CLONE = Path(__file__).resolve().parents[2]

PROJECT = """\
max_concurrent: 3
agents:
  sleeper:
    command: [sleep, "{prompt}"]
    max_concurrent: 1
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project: slotline.yaml at its top, and a nested folder to work in."""
    top = tmp_path / "app"
    (top / "src" / "pkg").mkdir(parents=True)
    (top / "slotline.yaml").write_text(PROJECT)
    return top


@pytest.fixture
def nodes() -> Iterator[list[subprocess.Popen[str]]]:
    """Nodes a test starts, stopped with SIGTERM at its end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "Traceback" not in err


def start_node(
    argv: list[str], cwd: Path, env: dict[str, str], nodes: list[subprocess.Popen[str]]
) -> str:
    """Start a node with its HTTP API on a free port of 127.0.0.1 in `cwd`; returns the
    line it prints first (its store and limit), once its API is up (and so its handler
    of SIGTERM, which stops it at the end of the test)."""
    proc = subprocess.Popen(
        [*argv, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    nodes.append(proc)
    lines = Lines(proc.stdout)
    first = lines.next()
    lines.until(lambda line: line.startswith(API_READY))
    return first


def test_submit_by_agent_type_from_a_projects_subfolder(cli: Run, project: Path) -> None:
    task = ok(
        cli("--json", "submit", "--agent", "sleeper", "--prompt", "1", cwd=project / "src" / "pkg")
    )
    assert (task["agent"], task["command"]) == ("sleeper", ["sleep", "1"])


def test_a_node_started_in_a_projects_subfolder_applies_its_agent_limit(
    cli: Run, project: Path, base_env: dict[str, str], nodes: list[subprocess.Popen[str]]
) -> None:
    # Given a node started in a folder below the project's slotline.yaml,
    argv = [sys.executable, "-m", "slotline", "serve", "--node-id", "sub"]
    start_node(argv, project / "src" / "pkg", base_env, nodes)
    limits = ok(cli("--json", "limits"))
    assert {"key": "agent", "value": "sleeper", "max": 1, "origin": "config"} in limits["limits"]
    # when three tasks of the agent type with `max_concurrent: 1` are queued at once,
    ids = [
        ok(cli("--json", "submit", "--agent", "sleeper", "--prompt", "1", cwd=project))["id"]
        for _ in range(3)
    ]

    def finished() -> list[dict[str, str]] | None:
        tasks = [ok(cli("--json", "show", id)) for id in ids]
        return tasks if all(t["status"] == "succeeded" for t in tasks) else None

    # then they run one after another, under the global limit of 3.
    tasks = until(finished, timeout=120, what="the three tasks finished")
    runs = [
        (datetime.fromisoformat(t["started_at"]), datetime.fromisoformat(t["finished_at"]))
        for t in tasks
    ]
    assert peak((start.timestamp(), end.timestamp()) for start, end in runs) == 1


def test_scripts_serve_reads_the_callers_slotline_yaml(
    tmp_path: Path, base_env: dict[str, str], nodes: list[subprocess.Popen[str]]
) -> None:
    venv = CLONE / ".venv"
    installed = venv / ".installed"
    if not (venv / "bin" / "slotline").exists() or not installed.exists():
        pytest.skip("scripts/serve would set up the clone's .venv first (no network here)")
    if installed.stat().st_mtime < (CLONE / "pyproject.toml").stat().st_mtime:
        pytest.skip("the clone's .venv is older than pyproject.toml: scripts/serve would renew it")
    # Given a user's folder, outside the clone, with its own slotline.yaml,
    user = tmp_path / "user"
    user.mkdir()
    (user / "slotline.yaml").write_text("max_concurrent: 4\n")
    # when scripts/serve is run from it,
    argv = ["bash", str(CLONE / "scripts" / "serve"), "--node-id", "script"]
    line = start_node(argv, user, base_env, nodes)
    # then the node serves the file's setting (the store is the test's: SLOTLINE_STORE).
    assert "(max_concurrent 4" in line, line
    assert base_env["SLOTLINE_STORE"] in line


def test_config_says_which_file_it_read_and_which_store(
    cli: Run, project: Path, tmp_path: Path
) -> None:
    nested = project / "src" / "pkg"
    shown = cli("config", cwd=nested)
    assert shown.out.startswith(f"# read from {project / 'slotline.yaml'},")
    assert "  sleeper:\n" in shown.out
    assert f"store: {tmp_path / 'store.db'}\n" in shown.out  # $SLOTLINE_STORE, not null
    # The file's own store, relative to its folder, is the one a node there would serve;
    (project / "slotline.yaml").write_text("store: queue.db\n")
    mine = ok(cli("--json", "config", cwd=nested, env={"SLOTLINE_STORE": None}))
    assert mine["store"] == str(project / "queue.db")
    assert mine["nodes"] == []  # read from that store, which it made: not the default one
    assert (project / "queue.db").exists()
    # a password in it is never shown;
    pg = "postgresql://me:secret@127.0.0.1/q?password=other"
    hidden = cli("config", cwd=nested, env={"SLOTLINE_STORE": pg})
    assert "secret" not in hidden.out
    assert "other" not in hidden.out
    assert "store: postgresql://me:***@127.0.0.1/q?password=***\n" in hidden.out
    # with no file anywhere, it says where it looked, and the default store.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    none = cli("config", cwd=elsewhere, env={"SLOTLINE_STORE": None})
    assert none.out.startswith(
        f"# no slotline.yaml found (looked in {elsewhere} and the folders above it, "
        f"then {tmp_path / 'xdg-config' / 'slotline' / 'slotline.yaml'})"
    )
    assert f"store: {tmp_path / 'xdg' / 'slotline' / 'slotline.db'}\n" in none.out
    # `slotline --config FILE config` reads FILE, as `slotline config --config FILE` does.
    given = ("--json", "--config", str(project / "slotline.yaml"), "config")
    named = ok(cli(*given, cwd=elsewhere, env={"SLOTLINE_STORE": None}))
    assert named["store"] == str(project / "queue.db")
    assert ok(cli("--json", "config", cwd=elsewhere))["agents"] == {}
