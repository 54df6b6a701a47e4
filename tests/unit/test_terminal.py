"""The pieces of interactive runs that need no node: names, sockets, what a log shows as
text, and the reasons a task has no terminal to type into."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from slotline.config.agent_types import AgentType
from slotline.errors import InvalidInput, InvalidTransition
from slotline.models import Attempt, Kind, Priority, Status, Task
from slotline.runlogs import Plain, plain_text
from slotline.runner.preflight import Level, check_agents
from slotline.runner.terminal_input import terminal_of
from slotline.runner.tmux import Terminal, session_name, socket_path
from slotline.spec import parse_spec


def test_a_session_is_named_by_its_task_and_attempt() -> None:
    assert session_name(Path("/logs/3f2a9c1e/2.log")) == "3f2a9c1e-2"


def test_a_socket_path_too_long_for_a_socket_goes_under_the_temporary_folder(
    tmp_path: Path,
) -> None:
    short = Path("/var/lib/slotline/logs")
    assert socket_path(short) == "/var/lib/slotline/logs/tmux.sock"
    deep = tmp_path / ("x" * 120) / "logs"
    found = socket_path(deep)
    assert len(found.encode()) <= 100
    assert Path(found).parent.name == f"slotline-{os.getuid()}"
    assert (Path(found).parent.stat().st_mode & 0o777) == 0o700
    assert socket_path(deep) == found  # every process of the machine finds the same


def test_a_terminal_is_read_from_beside_its_log(tmp_path: Path) -> None:
    log = tmp_path / "1.log"
    assert Terminal.of(log) is None
    Terminal("/tmp/s.sock", "abc-1").save(log)
    assert Terminal.of(log) == Terminal("/tmp/s.sock", "abc-1")
    assert (log.with_suffix(".tmux").stat().st_mode & 0o777) == 0o600
    assert Terminal("/s", "abc-1").target == "=abc-1:"  # the name exactly, never a prefix


def test_logs_show_a_terminal_as_text() -> None:
    screen = (
        b"\x1b[?1049h\x1b]0;claude\x07\x1b[1;32mDone\x1b[0m. Proceed? \x1b(B[y/n]\r\n"
        b"\x1bPq#0;2;0;0;0\x1b\\ok\x1b=\r\n"
    )
    assert plain_text(screen) == b"Done. Proceed? [y/n]\nok\n"
    # A sequence split between two chunks of a followed log is taken out whole.
    plain = Plain()
    parts = [plain.feed(screen[:7]), plain.feed(screen[7:30]), plain.feed(screen[30:], True)]
    assert b"".join(parts) == b"Done. Proceed? [y/n]\nok\n"


def _task(**fields: object) -> Task:
    task = parse_spec({"command": ["agent"], "interactive": True})
    assert task.interactive
    found = Task(
        id="3f2a9c1e" * 4, kind=Kind.COMMAND, command=("agent",), callable=None, args={},
        title="agent", agent=None, workspace=None, user=None, labels={}, env={},
        priority=Priority.NORMAL, boosted=False, start_now=False, rank="a", status=Status.QUEUED,
        status_reason=None, depends_on=(), parent_id=None, depth=0, max_attempts=1, backoff=5.0,
        timeout=None, queue_ttl=None, not_before=None, kill_request=None,
        restart_requested=False, created_at=1.0, queued_at=1.0, started_at=None,
        finished_at=None, exit_code=None, failure_reason=None, attempt_count=0,
        attempt_base=0, current_attempt=None, interactive=True,
    )  # fmt: skip
    return dataclasses.replace(found, **fields)  # type: ignore[arg-type]


def test_a_task_without_a_terminal_says_why(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="is not interactive: it runs without a terminal"):
        terminal_of(_task(interactive=False))
    with pytest.raises(InvalidTransition, match=r"is queued: it has no terminal until it runs"):
        terminal_of(_task())
    with pytest.raises(InvalidTransition, match=r"has ended \(failed\): its terminal is gone"):
        terminal_of(_task(status=Status.FAILED))
    attempt = Attempt(
        id="a1", task_id="t", number=1, token="x", node_id="far", pid=None, pid_started=None,
        started_at=1.0, finished_at=None, exit_code=None, outcome=None, reason=None,
        over_limit=False, lease_expires_at=None, log_path=str(tmp_path / "1.log"),
    )  # fmt: skip
    with pytest.raises(InvalidTransition, match="runs on node far, whose terminals are not"):
        terminal_of(_task(status=Status.RUNNING, attempts=(attempt,)))


def test_interactive_keys_of_an_agent_type() -> None:
    with pytest.raises(ValueError, match="idle_after, release_while_idle: only with interactive"):
        AgentType(command=["x"], idle_after=5.0, release_while_idle=True)
    agent = AgentType.model_validate(
        {"command": ["x"], "interactive": True, "idle_after": "2m"}, strict=False
    )
    assert agent.idle_after == 120.0
    assert parse_spec({"command": ["x"], "interactive": True}).interactive


def test_agents_check_names_tmux_for_an_interactive_type(monkeypatch: pytest.MonkeyPatch) -> None:
    agents = {"term": AgentType(command=["sh"], interactive=True)}
    (tmux,) = [f for f in check_agents(agents, probe=False) if f.check == "tmux"]
    assert tmux.level is Level.OK
    monkeypatch.setenv("PATH", "/nonexistent")
    (tmux,) = [f for f in check_agents(agents, probe=False) if f.check == "tmux"]
    assert tmux.level is Level.FAIL
    assert tmux.detail == "interactive runs need tmux, which is not installed"
