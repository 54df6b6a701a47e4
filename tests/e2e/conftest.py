"""Fixtures for the CLI tests: run `python -m slotline` for real against a temporary store.

Most tests run no node: a task is made "running" by claiming it through the store
directly, as a node would. Those that need real runs start `slotline serve` (`serve`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from slotline.store import Store, open_store

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
TASK_FIELDS = {
    "id", "title", "command", "status", "priority", "boosted", "position", "depends_on",
    "created_at", "started_at", "finished_at", "exit_code", "failure_reason", "attempts",
}  # fmt: skip
ATTEMPT_FIELDS = {"id", "number", "pid", "started_at", "finished_at", "exit_code", "over_limit"}
COMMANDS = (
    "serve", "submit", "show", "ls", "status", "events", "cancel", "terminate", "boost", "bump",
    "move", "priority", "restart", "hold", "release", "pause", "resume", "clear", "limits",
    "logs", "stats", "top", "export", "redrive", "config", "token",
)  # fmt: skip
STATUS_FIELDS = {"active", "max_concurrent", "slots_available", "at_capacity", "paused", "queued"}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def error_line(self) -> str:
        """The single line a failing command prints on stderr."""
        lines = self.err.splitlines()
        assert len(lines) == 1, f"expected one line on stderr, got: {self.err!r}"
        assert "Traceback" not in self.err
        return lines[0]


Run = Callable[..., Result]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def base_env(tmp_path: Path, store_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
    env.update(
        SLOTLINE_STORE=str(store_path),
        XDG_DATA_HOME=str(tmp_path / "xdg"),
        COLUMNS="200",
        PYTHONWARNINGS="error",
    )
    return env


@pytest.fixture
def cli(tmp_path: Path, base_env: dict[str, str]) -> Run:
    """Run `python -m slotline ARGS…`; `env=` adds or (with None) removes variables."""

    def run(
        *args: str, env: dict[str, str | None] | None = None, cwd: Path | None = None
    ) -> Result:
        full = dict(base_env)
        for name, value in (env or {}).items():
            if value is None:
                full.pop(name, None)
            else:
                full[name] = value
        proc = subprocess.run(
            [sys.executable, "-m", "slotline", *args],
            capture_output=True,
            text=True,
            env=full,
            cwd=cwd or tmp_path,
            timeout=60,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    """The same store, opened in-process, to set up states no CLI command reaches (running).

    It has one slot, so that a claim starts exactly the next task.
    """
    opened = open_store(store_path)
    opened.set_setting("max_concurrent", 1)
    yield opened
    opened.close()


def submit(cli: Run, *args: str) -> dict[str, Any]:
    """`slotline --json submit ARGS`, where ARGS include `-- CMD…`; returns the task."""
    if "--" not in args:
        args = (*args, "--", "true")
    result = cli("--json", "submit", *args)
    assert result.code == 0, result.err
    task: dict[str, Any] = result.json()
    return task


def ok(result: Result) -> Any:
    assert result.code == 0, result.err
    return result.json()


def claim_one(store: Store) -> str:
    """Start the next task as a node would; returns its id."""
    claims = store.claim("test-node").claims
    assert len(claims) == 1
    return claims[0].task.id


Serve = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def serve(base_env: dict[str, str], tmp_path: Path) -> Iterator[Serve]:
    """Start `slotline serve` (stopped with SIGTERM at the end of the test)."""
    nodes: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "slotline",
                "serve",
                "--no-http",
                "--node-id",
                "acceptance",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=base_env,
            cwd=tmp_path,
        )
        assert proc.stdout is not None
        assert "max_concurrent" in proc.stdout.readline()  # it is up
        nodes.append(proc)
        return proc

    yield start
    for proc in nodes:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err


def wait_for(check: Callable[[], object], timeout: float = 30.0) -> None:
    """Poll `check` until it returns something true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


Spawn = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def spawn_env(base_env: dict[str, str]) -> dict[str, str]:
    """The environment `spawn` starts commands with (a test module may override it)."""
    return base_env


@pytest.fixture
def spawn(spawn_env: dict[str, str], tmp_path: Path) -> Iterator[Spawn]:
    """Start `python -m slotline ARGS…` in the background; killed if still running."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "slotline", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=spawn_env,
            cwd=tmp_path,
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
