"""A run's time excludes the time its node was down: a node restarted after the run's
process ended finishes it at the exit file's time, not at the time it noticed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slotline.models import Status
from slotline.store import open_store
from waiting import until

SLEEP = 1.0
DOWN = 4.0  # the node stays down this long after the sleep has ended


def start_node(store_url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return subprocess.Popen(
        [sys.executable, "-m", "slotline", "--store", store_url, "serve", "--no-http",
         "--node-id", "downtime"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path,
    )  # fmt: skip


def exited_for(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime >= seconds
    except FileNotFoundError:
        return False


@pytest.mark.timeout(120)
def test_a_run_found_ended_after_a_restart_ran_for_its_own_time(
    store_url: str, tmp_path: Path
) -> None:
    # Given a node running `sleep 1`,
    store = open_store(store_url)
    task = store.submit({"command": ["sleep", str(SLEEP)]})
    node = start_node(store_url, tmp_path)
    try:
        until(lambda: store.get(task.id).attempts[-1:] and store.get(task.id).attempts[-1].pid,
              60, "the sleep runs")  # fmt: skip
    finally:
        # when the node is killed while it sleeps,
        node.send_signal(signal.SIGKILL)
        node.wait(timeout=10)
    log_path = store.get(task.id).attempts[-1].log_path
    assert log_path is not None
    exit_file = Path(log_path).with_suffix(".exit")
    # and restarted only well after the sleep has ended,
    until(lambda: exited_for(exit_file, DOWN), 60, "the sleep ended a while ago")
    node = start_node(store_url, tmp_path)
    try:
        until(lambda: store.get(task.id).status.terminal, 60, "the restarted node finishes it")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=30)
    # then it succeeded, and ran about as long as the sleep, not the downtime as well.
    done = store.get(task.id)
    assert done.status is Status.SUCCEEDED
    assert done.started_at is not None
    assert done.finished_at is not None
    ran = done.finished_at - done.started_at
    assert SLEEP <= ran + 0.05 < SLEEP + 2.0, ran
    attempt = done.attempts[-1]
    assert attempt.finished_at == done.finished_at
    store.close()
