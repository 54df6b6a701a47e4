"""Fixtures for the CLI tests: run `python -m slotline` for real against a temporary store.

Most tests run no node: a task is made "running" by claiming it through the store
directly, as a node would. Those that need real runs start `slotline serve` (`serve`).
"""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from clean_env import without_slotline_variables
from slotline.store import Store, open_store

# Each CLI call here is a new Python process (about 0.5 s of start-up on a quiet machine,
# five times that on a loaded one), and a test makes up to twenty: the per-test guard
# against a hang is longer here than pyproject's 120 s.
E2E_TIMEOUT = 300


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None and "/e2e/" in str(item.path):
            item.add_marker(pytest.mark.timeout(E2E_TIMEOUT))


ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
TASK_FIELDS = {
    "id", "title", "command", "status", "priority", "boosted", "position", "depends_on",
    "created_at", "started_at", "finished_at", "exit_code", "failure_reason", "attempts",
}  # fmt: skip
ATTEMPT_FIELDS = {"id", "number", "pid", "started_at", "finished_at", "exit_code", "over_limit"}
COMMANDS = (
    "serve", "submit", "show", "ls", "status", "events", "cancel", "terminate", "boost", "bump",
    "move", "priority", "restart", "hold", "release", "pause", "resume", "clear", "limits",
    "logs", "stats", "top", "export", "redrive", "config", "token", "bulk", "stop", "mcp",
    "schedule", "diff", "merge", "worktrees", "notify", "agents",
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
    env = without_slotline_variables()
    env.update(
        SLOTLINE_STORE=str(store_path),
        XDG_DATA_HOME=str(tmp_path / "xdg"),
        XDG_CONFIG_HOME=str(tmp_path / "xdg-config"),  # not the user's slotline.yaml
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


# -- a server over HTTP, with a token file (test_cli_remote, test_mcp) --------------------

# A hang guard for a line a process must print (a server's "ready" among them, which under
# a load of 13 on 2 cores was seen to take more than 20 s).
LINE_TIMEOUT = 60.0
API_READY = "HTTP API at "


class Lines:
    """The lines a process writes to a pipe, read in a thread so a test can wait for the
    next one with a deadline instead of blocking for ever."""

    def __init__(self, stream: IO[str] | None) -> None:
        assert stream is not None
        self._lines: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put("")  # end of the stream

    def next(self, timeout: float = LINE_TIMEOUT) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout}s") from None
        assert line, "the process closed its output"
        return line

    def until(self, wanted: Callable[[str], bool], timeout: float = LINE_TIMEOUT) -> str:
        while not wanted(line := self.next(timeout)):
            pass
        return line

    def drained(self, timeout: float = LINE_TIMEOUT) -> None:
        """Wait until the process has closed its output and every line was read (then
        the pipe may be closed without pulling it from under the reading thread)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"output still open after {timeout}s"


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    return tmp_path / "config" / "tokens.json"


@pytest.fixture
def env(base_env: dict[str, str], tokens_file: Path) -> dict[str, str]:
    return {**base_env, "SLOTLINE_TOKENS": str(tokens_file)}


@pytest.fixture
def run(cli: Run, tokens_file: Path) -> Run:
    """`cli` with the test's token file, which the server reads too."""

    def call(*args: str, env: dict[str, str | None] | None = None) -> Result:
        return cli(*args, env={"SLOTLINE_TOKENS": str(tokens_file), **(env or {})})

    return call


Start = Callable[..., str]


@pytest.fixture
def serve_http(env: dict[str, str], tmp_path: Path) -> Iterator[Start]:
    """Start `slotline serve --port 0` on 127.0.0.1 and return its URL once the HTTP server
    is ready; the test's end stops it with SIGTERM and checks it stopped cleanly."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "slotline",
                "serve",
                "--port",
                "0",
                "--node-id",
                "remote",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=tmp_path,
        )
        started.append(proc)
        ready = Lines(proc.stdout).until(lambda line: line.startswith(API_READY))
        return ready[len(API_READY) :].split()[0]

    yield start
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
