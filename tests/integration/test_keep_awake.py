"""Keeping the machine awake while runs go on: a node holds `caffeinate` (macOS) or
`systemd-inhibit` (Linux) from its first run's start to its last run's end. Stand-ins put
first on the PATH record how they were started and wait to be stopped."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import psutil
import pytest

from slotline.models import Status
from slotline.node.awake import KeepAwake, inhibitor_argv
from slotline.node.node import Node
from slotline.store import Store, open_store
from waiting import until, until_async

# Each start: its pid, then its argv, one line each, then a blank line.
STANDIN = """#!/bin/sh
printf '%s\\n' "$$" "$(basename "$0")" "$@" "" >> "{record}"
{then}
"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "store.db")
    yield s
    s.close()


@pytest.fixture
def record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where stand-in `caffeinate` and `systemd-inhibit` (first on the PATH) write their
    pid and argv; each waits until it is stopped."""
    return standins(tmp_path, monkeypatch, then="exec sleep 600")


def standins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    record = tmp_path / "inhibitors.txt"
    for name in ("caffeinate", "systemd-inhibit"):
        script = folder / name
        script.write_text(STANDIN.format(record=record, then=then))
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return record


def started(record: Path) -> list[tuple[int, list[str]]]:
    """(pid, argv) of each stand-in started so far."""
    if not record.exists():
        return []
    *complete, _being_written = record.read_text().split("\n\n")
    return [(int(pid), argv) for pid, *argv in map(str.splitlines, complete)]


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@asynccontextmanager
async def running_node(store: Store, tmp_path: Path, keep_awake: bool) -> AsyncIterator[Node]:
    node = Node(store, log_dir=tmp_path / "logs", kill_grace=2.0, keep_awake=keep_awake)
    stop = asyncio.Event()
    task = asyncio.create_task(node.run(stop))
    try:
        yield node
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def waiting_run(store: Store, tmp_path: Path) -> tuple[str, Path]:
    """A run that goes on until its `go` file exists."""
    go = tmp_path / "go"
    loop = f"while [ ! -e {go} ]; do sleep 0.05; done"
    task = store.submit({"command": ["sh", "-c", loop]})
    return task.id, go


def test_the_inhibitor_is_held_while_runs_go_on_and_released_when_they_end(
    store: Store, tmp_path: Path, record: Path
) -> None:
    first, go = waiting_run(store, tmp_path)
    second = store.submit({"command": ["sh", "-c", f"while [ ! -e {go}2 ]; do sleep 0.05; done"]})

    async def scenario() -> None:
        async with running_node(store, tmp_path, keep_awake=True):
            # When the first run starts, one inhibitor is started, as the platform's tool.
            [(pid, argv)] = await until_async(lambda: started(record), what="an inhibitor")
            assert argv == inhibitor_argv()
            assert running(pid)
            await until_async(lambda: store.get(second.id).status is Status.RUNNING)
            # One run ends: the other still holds it.
            go.touch()
            await until_async(lambda: store.get(first).status is Status.SUCCEEDED)
            assert running(pid)
            assert len(started(record)) == 1
            # The last run ends: it is released.
            Path(f"{go}2").touch()
            await until_async(lambda: not running(pid), what="the inhibitor stopped")

    try:
        asyncio.run(scenario())
    finally:  # never leave a run behind
        go.touch()
        Path(f"{go}2").touch()


def test_a_node_that_stops_releases_the_inhibitor_its_runs_go_on(
    store: Store, tmp_path: Path, record: Path
) -> None:
    task_id, go = waiting_run(store, tmp_path)

    async def scenario() -> None:
        async with running_node(store, tmp_path, keep_awake=True):
            await until_async(lambda: started(record), what="an inhibitor")
        [(pid, _)] = started(record)
        assert not running(pid)
        assert store.get(task_id).status is Status.RUNNING  # a command outlives its node

    try:
        asyncio.run(scenario())
    finally:
        go.touch()
    until(lambda: not running(store.get(task_id).attempts[-1].pid or 0), what="run ended")


def test_with_keep_awake_off_nothing_is_started(store: Store, tmp_path: Path, record: Path) -> None:
    task = store.submit({"command": ["true"]})
    asyncio.run(Node(store, log_dir=tmp_path / "logs", keep_awake=False).run_until_idle(timeout=30))

    assert store.get(task.id).status is Status.SUCCEEDED
    assert started(record) == []


def test_on_macos_caffeinate_waits_on_the_node(record: Path) -> None:
    awake = KeepAwake(True, platform="darwin")
    awake.update(1)
    try:
        [(pid, argv)] = until(lambda: started(record), what="caffeinate")
        assert argv == ["caffeinate", "-i", "-w", str(os.getpid())]
        assert running(pid)
        awake.update(2)
        assert len(started(record)) == 1
    finally:
        awake.update(0)
    assert not running(pid)
    assert not awake.held


def test_an_inhibitor_that_refuses_is_said_once_and_not_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As systemd-inhibit in a container: no login manager to ask.
    refusing = "echo 'Failed to connect to bus: No such file or directory' >&2; exit 1"
    record = standins(tmp_path, monkeypatch, then=refusing)
    awake = KeepAwake(True, platform="linux")
    caplog.set_level(logging.INFO, "slotline.node.node")

    awake.update(1)
    [(pid, _)] = until(lambda: started(record), what="systemd-inhibit")
    until(lambda: not running(pid), what="it ended")
    for runs in (1, 0, 1, 0):
        awake.update(runs)

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "cannot keep the machine awake while runs go on (systemd-inhibit ended: "
        "Failed to connect to bus: No such file or directory); it may sleep"
    ]
    assert len(started(record)) == 1


def test_a_missing_tool_is_said_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    awake = KeepAwake(True, platform="linux")

    for runs in (1, 0, 1):
        awake.update(runs)

    assert [r.getMessage() for r in caplog.records] == [
        "cannot keep the machine awake while runs go on (systemd-inhibit not found); it may sleep"
    ]
    assert not awake.held


def test_a_killed_inhibitor_whose_child_lives_on_never_blocks_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an inhibitor whose child holds its stderr open (as systemd-inhibit's `cat`),
    record = standins(tmp_path, monkeypatch, then="sleep 600 & wait")
    awake = KeepAwake(True, platform="linux")
    awake.update(1)
    [(pid, _)] = until(lambda: started(record), what="systemd-inhibit")
    child = until(lambda: psutil.Process(pid).children(), what="its child")[0]
    # when the inhibitor alone is killed (a user's kill, the OOM killer),
    os.kill(pid, signal.SIGKILL)
    until(lambda: not running(pid), what="it ended")
    # then the next update notices, gives it up, and returns at once, its child gone too.
    assert awake.wants_update(1)
    done = threading.Thread(target=awake.update, args=(1,), daemon=True)
    done.start()
    done.join(timeout=30)
    assert not done.is_alive(), "update blocked on the killed inhibitor's output"
    assert not awake.held
    until(lambda: not running(child.pid), what="its child ended")
