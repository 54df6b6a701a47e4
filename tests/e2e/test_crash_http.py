"""Crash recovery with the HTTP API on: agents hold none of the node's descriptors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from slotline.models import Status
from slotline.store import Store
from waiting import until

from .conftest import Run


def fds(pid: int) -> list[int]:
    return sorted(int(name) for name in os.listdir(f"/proc/{pid}/fd"))


def running_pid(store: Store, task_id: str) -> int | None:
    task = store.get(task_id)
    if task.status is not Status.RUNNING or not task.attempts:
        return None
    return task.attempts[-1].pid


class Nodes:
    """`slotline --json serve` with its HTTP API, started and stopped by the test."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.env, self.cwd = env, cwd
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, port: int, **popen: object) -> tuple[subprocess.Popen[str], int]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "slotline", "--json", "serve", "--node-id", "web",
             "--port", str(port)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env,
            cwd=self.cwd, **popen,  # type: ignore[call-overload]
        )  # fmt: skip
        self.procs.append(proc)
        assert proc.stdout is not None
        proc.stdout.readline()  # the node's line
        line = proc.stdout.readline()  # the HTTP line, or nothing if it failed
        assert line, f"the node did not serve HTTP: {proc.communicate()[1]}"
        return proc, int(json.loads(line)["http"].rsplit(":", 1)[1])


@pytest.fixture
def nodes(base_env: dict[str, str], tmp_path: Path) -> Iterator[Nodes]:
    started = Nodes(base_env, tmp_path)
    yield started
    for proc in started.procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def kill_group(pid: int | None) -> None:
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def test_an_agent_and_its_keeper_hold_fds_0_1_2_only(nodes: Nodes, store: Store) -> None:
    # Given a node serving HTTP that itself inherited an extra open descriptor,
    extra_read, extra_write = os.pipe()
    os.set_inheritable(extra_write, True)
    try:
        nodes.start(0, pass_fds=(extra_write,))
    finally:
        os.close(extra_read)
        os.close(extra_write)
    # when it runs an agent,
    task = store.submit({"command": ["sleep", "60"]})
    until(lambda: running_pid(store, task.id))
    keeper = running_pid(store, task.id)
    assert keeper is not None
    try:
        until(lambda: psutil.Process(keeper).children())
        agent = psutil.Process(keeper).children()[0].pid
        # then the agent and the keeper around it hold stdin, stdout and stderr, nothing
        # else: not the API's listening socket, not the node's pipes.
        assert fds(agent) == [0, 1, 2]
        assert fds(keeper) == [0, 1, 2]
    finally:
        kill_group(keeper)


def test_kill_9_of_a_node_serving_http_then_restart_on_the_same_port_readopts(
    nodes: Nodes, store: Store, tmp_path: Path
) -> None:
    # Given an agent running under a node that serves HTTP,
    node, port = nodes.start(0)
    go = tmp_path / "go"
    script = f"while [ ! -e {go} ]; do sleep 0.05; done; exit 7"
    task = store.submit({"command": ["sh", "-c", script]})
    until(lambda: running_pid(store, task.id))
    keeper = running_pid(store, task.id)
    try:
        # when the node is killed with SIGKILL and started again at once on the same port,
        node.send_signal(signal.SIGKILL)
        node.wait(timeout=10)
        nodes.start(port)
        # then it re-adopts the agent,
        until(
            lambda: any(
                e.kind == "reconciled" and e.data.get("action") == "adopted" for e in store.events()
            )
        )
        # and collects its exit code when it ends.
        go.touch()
        until(lambda: store.get(task.id).status.terminal)
        done = store.get(task.id)
        assert done.status is Status.FAILED
        assert done.exit_code == 7
        assert len(done.attempts) == 1
    finally:
        kill_group(keeper)


def test_a_node_that_cannot_listen_changes_nothing(cli: Run, store: Store) -> None:
    # Given a queued task and a port another program listens on,
    task = store.submit({"command": ["true"]})
    before = (store.last_seq(), store.settings()["max_concurrent"])
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # when a node is asked to serve its API there (and to change the limit),
        result = cli("serve", "--node-id", "web", "--port", str(port), "--max-concurrent", "5")
    # then it stops with a clear error before it registers, claims or writes anything.
    assert result.code != 0
    assert f"cannot listen on 127.0.0.1:{port}" in result.err
    assert "Traceback" not in result.err
    assert (store.last_seq(), store.settings()["max_concurrent"]) == before
    assert store.get(task.id).status is Status.QUEUED
    assert store.node("web") is None
