"""On SQLite keepers do not fence (every node is on this machine, and agents outlive a
node's restart however long it takes): another node on the same store reclaims a run of
a node that stopped heartbeating only once its keeper is gone, so it never runs twice."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clean_env import without_slotline_variables
from slotline.models import Status
from slotline.store import Store, open_store
from waiting import until

LEASE = 1.0


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def start(procs: list[subprocess.Popen[bytes]], tmp_path: Path, node_id: str) -> None:
    env = without_slotline_variables()
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    with open(tmp_path / f"{node_id}.err", "wb") as err:
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "slotline",
                    "--store",
                    str(tmp_path / "q.db"),
                    "serve",
                    "--no-http",
                    "--node-id",
                    node_id,
                    "--lease",
                    str(LEASE),
                ],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                cwd=tmp_path,
            )
        )


def test_a_dead_nodes_run_whose_keeper_lives_is_not_reclaimed_until_it_ends(
    tmp_path: Path, serve: list[subprocess.Popen[bytes]]
) -> None:
    store: Store = open_store(str(tmp_path / "q.db"))
    go = tmp_path / "go"
    task = store.submit(
        {"command": ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"], "max_attempts": 2}
    )
    # Given node a running the task, killed with SIGKILL (its agent's keeper lives on),
    start(serve, tmp_path, "a")
    until(
        lambda: store.get(task.id).attempts and store.get(task.id).attempts[0].pid, what="a runs it"
    )
    serve[0].send_signal(signal.SIGKILL)
    serve[0].wait(timeout=30)
    row = store.node("a")
    assert row is not None
    # when node b heartbeats for many of a's leases,
    start(serve, tmp_path, "b")
    until(lambda: (b := store.node("b")) is not None
          and float(b["heartbeat_at"]) > float(row["heartbeat_at"]) + 5 * LEASE,
          what="b heartbeats past a's lease")  # fmt: skip
    # then b has not reclaimed a's run (it still runs, under its keeper),
    attempt = store.get(task.id).attempts[0]
    assert attempt.finished_at is None
    assert store.get(task.id).status is Status.RUNNING
    # and once the agent ends and its keeper with it, b reclaims it and the task ends.
    go.touch()
    until(lambda: store.get(task.id).status.terminal, what="the task ends")
    attempts = store.get(task.id).attempts
    assert attempts[0].reason == "interrupted: node a stopped heartbeating"
    assert all(
        earlier.finished_at is not None and earlier.finished_at <= later.started_at
        for earlier, later in itertools.pairwise(attempts)
    )
