"""Crash safety: `kill -9` of `slotline serve` at random moments loses and doubles nothing."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from overlap import peak
from slotline.models import Status
from slotline.store import open_store

KILLS = 12
LIMIT = 3


def start_node(store_path: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
    return subprocess.Popen(
        [sys.executable, "-m", "slotline", "--store", str(store_path), "serve", "--no-http",
         "--node-id", "crashy"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )  # fmt: skip


def test_kill_9_loop_keeps_every_task_and_the_limit(tmp_path: Path) -> None:
    # Given a workload of real commands at limit 3,
    store_path = tmp_path / "store.db"
    store = open_store(store_path)
    store.set_setting("max_concurrent", LIMIT)
    rng = random.Random(9)
    tasks = []
    for i in range(24):
        if i % 6 == 5:
            argv = ["sh", "-c", f"sleep {rng.uniform(0.1, 0.4):.2f}; exit 3"]
        else:
            argv = ["sleep", f"{rng.uniform(0.1, 0.6):.2f}"]
        tasks.append(store.submit({"command": argv, "max_attempts": 3, "backoff": 0.01}))

    # when the node is killed with SIGKILL at random moments and restarted each time,
    for _ in range(KILLS):
        node = start_node(store_path, tmp_path)
        time.sleep(rng.uniform(0.15, 0.8))
        node.send_signal(signal.SIGKILL)
        node.wait(timeout=10)

    # and a last node drains what is left,
    node = start_node(store_path, tmp_path)
    try:
        deadline = time.monotonic() + 90
        while not all(store.get(t.id).status.terminal for t in tasks):
            assert time.monotonic() < deadline, "the queue did not drain"
            time.sleep(0.1)
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=30)

    # then every task ended with the attempts it should have,
    for submitted in tasks:
        task = store.get(submitted.id)
        attempts = task.attempts
        failing = submitted.command[0] == "sh"
        assert task.status is (Status.FAILED if failing else Status.SUCCEEDED), task
        assert 1 <= len(attempts) <= 3
        interrupted = [a for a in attempts if (a.reason or "").startswith("interrupted")]
        if failing:
            assert all(a.exit_code == 3 for a in attempts if a not in interrupted)
        else:
            # Every attempt but the last was interrupted: a live agent is re-adopted, not rerun.
            assert len(interrupted) == len(attempts) - 1
            assert attempts[-1].exit_code == 0
        # none ran twice at once,
        for earlier, later in itertools.pairwise(attempts):
            assert earlier.finished_at is not None
            assert earlier.finished_at <= later.started_at
    # no more than the limit ran at once,
    every = store.attempts()
    assert peak((a.started_at, a.finished_at) for a in every) <= LIMIT
    # the kills did land on running agents, which later nodes re-adopted,
    actions = [e.data["action"] for e in store.events() if e.kind == "reconciled"]
    assert "adopted" in actions
    # and the queue order was kept: first starts follow submission order.
    first_starts = [store.get(t.id).attempts[0].started_at for t in tasks]
    assert first_starts == sorted(first_starts)
    store.close()
