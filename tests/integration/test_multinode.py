"""Several real nodes on one real PostgreSQL store: a node dies or stops, the others go on.

Each node is a `slotline serve` subprocess (`tests/nodes.py`) with a short lease, so that
its runs are reaped by another node's `node/adopt.py` when it stops heartbeating.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest

from nodes import APP, Nodes, live_runs, reaped_reason, session_states
from overlap import peak
from slotline.models import Status
from slotline.store import Store
from slotline.store.pg_url import split_url
from waiting import until

pytestmark = pytest.mark.postgres

LEASE = 4.0
LIMIT = 3


@pytest.fixture
def store(pg_store: Store) -> Store:
    return pg_store


def assert_never_ran_twice(store: Store, task_ids: list[str]) -> None:
    for task_id in task_ids:
        for earlier, later in itertools.pairwise(store.get(task_id).attempts):
            assert earlier.finished_at is not None
            assert earlier.finished_at <= later.started_at


@pytest.mark.timeout(300)  # beyond the drain's hang guard
@pytest.mark.parametrize(
    "clock_offsets",
    [
        pytest.param({"n1": 0.0, "n2": 0.0, "n3": 0.0}, id="same-clocks"),
        # The dead node's clock runs ten minutes ahead (its leases would never lapse by
        # its own clock) and a live one's ten minutes behind (its heartbeats would look
        # ten minutes old): only the database's clock counts.
        pytest.param({"n1": 600.0, "n2": -600.0, "n3": 0.0}, id="clocks-ten-minutes-off"),
    ],
)
def test_three_nodes_one_killed_with_its_agents_every_task_ends_within_the_limit(
    store: Store, nodes: Nodes, clock_offsets: dict[str, float]
) -> None:
    # Given a global limit of 3 and a line of real commands, with node n1 running some,
    store.set_setting("max_concurrent", LIMIT)
    tasks = [
        store.submit({"command": ["sleep", "1"], "max_attempts": 3, "backoff": 0.01})
        for _ in range(12)
    ]
    ids = [t.id for t in tasks]
    nodes.start("n1", clock_offset=clock_offsets["n1"])
    until(lambda: live_runs(store, "n1"), what="n1 runs an agent")
    nodes.start("n2", clock_offset=clock_offsets["n2"])
    nodes.start("n3", clock_offset=clock_offsets["n3"])
    # when n1 and its agents are killed with SIGKILL,
    nodes.kill_with_agents("n1")
    row = store.node("n1")
    assert row is not None
    last_beat = float(row["heartbeat_at"])
    # then the other nodes finish every task,
    # (A hang guard: n2 and n3 were seen to take 28 s just to start beside two busy loops.)
    until(lambda: all(store.get(i).status.terminal for i in ids), 180, what="the line drains")
    assert all(store.get(i).status is Status.SUCCEEDED for i in ids)
    # n1's runs were finished by them once its lease lapsed (not before), as interrupted,
    attempts = store.attempts()
    of_n1 = [a for a in attempts if a.node_id == "n1"]
    reaped = [a for a in of_n1 if a.reason == reaped_reason("n1")]
    assert reaped
    assert all(a.finished_at is not None for a in of_n1)
    assert all(a.exit_code == 0 or a in reaped for a in of_n1)
    assert all(a.finished_at is not None and a.finished_at >= last_beat + LEASE for a in reaped)
    # no live node's run was taken for dead,
    assert not [a for a in attempts if a.node_id != "n1" and "heartbeating" in (a.reason or "")]
    # and the global limit held across the nodes, with no task running twice at once.
    assert peak((a.started_at, a.finished_at) for a in attempts) <= LIMIT
    assert_never_ran_twice(store, ids)


def test_a_stopped_node_is_reaped_and_once_resumed_its_reports_are_refused(
    store: Store, nodes: Nodes, tmp_path: Path
) -> None:
    # Given node B (one slot) running an agent that waits for a go file, and node A,
    store.set_setting("max_concurrent", 2)
    go = tmp_path / "go"
    wait_go = ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"]
    # (no backoff: its retry takes the slot B's run held, ahead of the line)
    first = store.submit({"command": wait_go, "max_attempts": 2, "backoff": 0})
    nodes.start("b", "--slots", "1")
    until(lambda: live_runs(store, "b"), what="b runs the agent")
    (stale,) = live_runs(store, "b")
    assert stale.pid is not None
    nodes.start("a")
    rest = [store.submit({"command": wait_go, "backoff": 0.01}) for _ in range(3)]
    # when B is stopped with SIGSTOP (its agent runs on),
    nodes.freeze("b")
    # then A finishes B's run as interrupted once B's lease lapses, and runs it again,
    until(lambda: store.attempt(stale.id).finished_at is not None, what="b's run reaped")
    assert store.attempt(stale.id).reason == reaped_reason("b")
    until(
        lambda: [a.node_id for a in store.get(first.id).attempts] == ["b", "a"],
        what="a runs the task again",
    )
    # the slot B held came back: two tasks run on A, the limit.
    until(lambda: len(live_runs(store, "a")) == 2, what="a fills both slots")
    # When B resumes, it stops its stale agent and its report of it is refused.
    nodes.procs["b"].send_signal(signal.SIGCONT)
    until(lambda: not psutil.pid_exists(stale.pid or 0), what="b stops its stale agent")
    until(lambda: "outcome not recorded" in nodes.stderr("b"), what="b's report refused")
    assert store.attempt(stale.id).reason == reaped_reason("b")
    # Then every task ends, each run once at a time, within the limit.
    go.touch()
    ids = [first.id, *(t.id for t in rest)]
    until(lambda: all(store.get(i).status.terminal for i in ids), what="the line drains")
    assert all(store.get(i).status is Status.SUCCEEDED for i in ids)
    assert [len(store.get(i).attempts) for i in ids] == [2, 1, 1, 1]
    assert_never_ran_twice(store, ids)
    assert peak((a.started_at, a.finished_at) for a in store.attempts()) <= 2


FROZEN_IN_A_TRANSACTION = """
import os, signal, sys
from slotline.store import open_store
store = open_store(sys.argv[1])
with store._transaction(write=True):  # the write lock, as every verb takes it
    os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_a_node_frozen_inside_a_transaction_holds_the_others_up_only_briefly(
    store: Store, pg_url: str
) -> None:
    # Given a process frozen (SIGSTOP) while it holds the store's write lock,
    app = APP + "frozen"
    frozen = subprocess.Popen(
        [sys.executable, "-c", FROZEN_IN_A_TRANSACTION, f"{pg_url}&application_name={app}"]
    )
    conninfo, _ = split_url(pg_url)
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:

            def states() -> list[str]:
                return session_states(conn, app)

            until(
                lambda: (
                    "idle in transaction" in states()
                    and psutil.Process(frozen.pid).status() == psutil.STATUS_STOPPED
                ),
                what="frozen in a transaction",
            )
            # a submit does not wait for it (submits are not serialized with claims),
            task = store.submit({"command": ["true"]})
            assert store.get(task.id).status is Status.QUEUED
            assert "idle in transaction" in states()
            # and when another node claims, its claim goes through once the server ends
            # the frozen session (idle_in_transaction_session_timeout, 10 s), well before
            # the writer would give up waiting for the lock (lock_timeout, 60 s),
            assert [c.task.id for c in store.claim("node-b").claims] == [task.id]
            # and the frozen session is gone (its pool's idle connections are not).
            assert "idle in transaction" not in states()
    finally:
        frozen.send_signal(signal.SIGCONT)
        frozen.kill()
        frozen.wait(timeout=30)
