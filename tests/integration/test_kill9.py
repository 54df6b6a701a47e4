"""Crash safety: `kill -9` of `slotline serve` at random moments loses and doubles nothing,
on SQLite and on PostgreSQL. Each kill waits until the node runs something."""

from __future__ import annotations

import itertools
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clean_env import without_slotline_variables
from overlap import peak
from slotline.models import Status
from slotline.store import Store, open_store
from waiting import until

KILLS = {"sqlite": 12, "postgres": 6}
LIMIT = 3


def start_node(store_url: str, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = without_slotline_variables()
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return subprocess.Popen(
        [sys.executable, "-m", "slotline", "--store", store_url, "serve", "--no-http",
         "--node-id", "crashy"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
    )  # fmt: skip


def supervising(store: Store, since: int) -> bool:
    """True once the node started after event `since` has a running process in hand:
    it recorded a new one's pid, or re-adopted a live one."""
    return any(
        e.kind == "started" or (e.kind == "reconciled" and e.data.get("action") == "adopted")
        for e in store.events(since)
    )


# Bounded by its count of kills, not by time: each round starts a node (a second or two of
# imports), and on a busy machine those add up past the default timeout.
@pytest.mark.timeout(300)
def test_kill_9_loop_keeps_every_task_and_the_limit(store_url: str, tmp_path: Path) -> None:
    # Given a workload of real commands at limit 3, one of which runs until told to stop,
    backend = "sqlite" if "://" not in store_url else "postgres"
    store = open_store(store_url)
    store.set_setting("max_concurrent", LIMIT)
    rng = random.Random(9)
    go = tmp_path / "go"
    tasks = [store.submit({"command": ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"]})]
    for i in range(1, 24):
        if i % 6 == 5:
            argv = ["sh", "-c", f"sleep {rng.uniform(0.1, 0.4):.2f}; exit 3"]
        else:
            argv = ["sleep", f"{rng.uniform(0.1, 0.6):.2f}"]
        tasks.append(store.submit({"command": argv, "max_attempts": 3, "backoff": 0.01}))

    # when the node is killed with SIGKILL once it runs something (at a random moment
    # after that) and restarted each time,
    for _ in range(KILLS[backend]):
        since = store.last_seq()
        node = start_node(store_url, tmp_path)
        try:
            until(lambda since=since: supervising(store, since), 60, "the node runs an agent")
            time.sleep(rng.uniform(0, 0.3))  # then a random moment of its run
        finally:
            node.send_signal(signal.SIGKILL)
            node.wait(timeout=10)
    go.touch()

    # and a last node drains what is left,
    node = start_node(store_url, tmp_path)
    try:
        until(lambda: all(store.get(t.id).status.terminal for t in tasks), 90, "the drain")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=30)

    # then every task ended with the attempts it should have,
    for submitted in tasks:
        task = store.get(submitted.id)
        attempts = task.attempts
        failing = submitted.command[-1].endswith("exit 3")
        assert task.status is (Status.FAILED if failing else Status.SUCCEEDED), task
        # (an attempt killed before its command started is not counted: it never ran)
        counted = [a for a in attempts if "before its command started" not in (a.reason or "")]
        assert 1 <= len(counted) <= 3
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
    # the agent that ran through every kill among them, one attempt all along,
    adopted = [
        e for e in store.events(limit=100_000)
        if e.kind == "reconciled" and e.task_id == tasks[0].id and e.data["action"] == "adopted"
    ]  # fmt: skip
    assert len(adopted) >= KILLS[backend] - 1  # every node after the first (the last may
    # find it already ended: then it collects its exit code)
    assert len(store.get(tasks[0].id).attempts) == 1
    # and the queue order was kept: first starts follow submission order.
    first_starts = [store.get(t.id).attempts[0].started_at for t in tasks]
    assert first_starts == sorted(first_starts)
    store.close()
