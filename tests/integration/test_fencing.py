"""Self-fencing on PostgreSQL with real processes: a task never runs twice at once, even
when its node freezes, loses the database or has its clock off (issue 28).

Each task's agent is `solo_agent.py`, which holds a lock per task for its whole life and
writes `DOUBLE` if another process of its task lives at the same instant; a sampler
(`double_runs.Witness`) counts the live agents every ~50 ms besides. The fault is what
node A suffers (SIGSTOP, a paused proxy before its database, SIGKILL); node B, started
once A runs every task, reclaims what A's lease no longer holds.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from db_proxy import PausableProxy
from double_runs import Entry, Witness
from nodes import Nodes, live_runs, reaped_reason
from slotline.models import Attempt, Event, Status
from slotline.store import Store
from waiting import until

pytestmark = pytest.mark.postgres

LEASE = 3.0
MARGIN = min(5.0, max(0.5, LEASE / 6))  # `slotline.fencing.margin`, stated here
LIMIT = 3
WORK = 15.0  # seconds an agent works: it must outlive the freeze, till B runs its copy


@pytest.fixture
def store(pg_store: Store) -> Store:
    return pg_store


@pytest.fixture
def witness(tmp_path: Path) -> Iterator[Witness]:
    watching = Witness(tmp_path / "agents").start()
    yield watching
    watching.stop()
    for pid in watching.alive(list(watching.seen)):  # what stopped nodes left running
        os.kill(pid, signal.SIGKILL)


def submit_three(store: Store, witness: Witness, seconds: float, max_attempts: int) -> list[str]:
    """Three tasks at a global limit of three, keyed t0..t2 in the agents' ledger."""
    store.set_setting("max_concurrent", LIMIT)
    return [
        store.submit(
            {"command": witness.command(f"t{i}", seconds), "max_attempts": max_attempts,
             "backoff": 0}
        ).id
        for i in range(LIMIT)
    ]  # fmt: skip


def a_runs_all_then_b_starts(
    store: Store, nodes: Nodes, witness: Witness, **a_options: str | float
) -> list[Attempt]:
    """Node A runs the three tasks (their agents started), then node B joins: A's runs."""
    nodes.lease = LEASE
    nodes.start("a", **a_options)  # type: ignore[arg-type]
    runs = until(lambda: len(now := live_runs(store, "a")) == LIMIT and now, 60, "a runs all")
    until(lambda: len(witness.entries("start")) == LIMIT, what="a's agents started")
    nodes.start("b")
    until(lambda: store.node("b"), what="b registered")
    return runs


def b_runs_the_copies(store: Store, witness: Witness) -> None:
    """Wait (while A is silenced) until B has started an agent for every task."""
    until(lambda: len(live_runs(store, "b")) == LIMIT, 60, "b runs the tasks again")
    until(lambda: len(on_node(store, witness, "b")) == LIMIT, what="b's agents started")


def on_node(store: Store, witness: Witness, node_id: str) -> dict[str, Entry]:
    """Each task's agent (by key) that an attempt of `node_id` started."""
    return {
        e.key: e
        for e in witness.entries()
        if e.word != "done" and store.attempt(e.attempt_id).node_id == node_id
    }


def fenced_events(store: Store) -> list[Event]:
    return [e for e in store.events() if e.kind == "fenced"]


def assert_ran_alone(witness: Witness) -> None:
    """Neither witness saw two processes of a task at once, nor more than the limit."""
    assert witness.entries("DOUBLE") == []
    assert max(witness.peak_per_task.values()) == 1
    assert witness.peak_total <= LIMIT


def assert_a_stopped_before_b_started(store: Store, witness: Witness) -> None:
    """Each task's agent on A was gone (last seen alive) before its copy on B started."""
    on_a, on_b = on_node(store, witness, "a"), on_node(store, witness, "b")
    assert sorted(on_a) == sorted(on_b) == ["t0", "t1", "t2"]
    for key, entry in on_a.items():
        assert witness.seen[entry.pid].last < on_b[key].at, key


def assert_a_fenced_its_runs_and_b_finished_them(
    store: Store, witness: Witness, a_runs: list[Attempt], ids: list[str]
) -> None:
    """After A resumed: it records its runs fenced and starts nothing from its stale view;
    B's copies run to the end."""
    # A may be between retries (its store backoff doubles up to 10 s) and then reconnects;
    # on a loaded machine that took over 30 s once, so the wait is generous.
    until(lambda: len(fenced_events(store)) == LIMIT, timeout=90, what="a records its runs fenced")
    events = fenced_events(store)
    assert {e.task_id for e in events} == set(ids)
    assert {e.data["attempt"] for e in events} == {a.id for a in a_runs}
    assert {e.data["node"] for e in events} == {"a"}
    assert {e.data["reclaimed"] for e in events} == {True}  # B had, before A resumed
    for run in a_runs:
        assert "[slotline: fenced" in Path(run.log_path or "").read_text()
    until(lambda: all(store.get(i).status.terminal for i in ids), WORK + 60, "the line drains")
    assert [store.get(i).status for i in ids] == [Status.SUCCEEDED] * LIMIT
    assert [[a.node_id for a in store.get(i).attempts] for i in ids] == [["a", "b"]] * LIMIT
    assert {a.id for a in store.attempts() if a.node_id == "a"} == {a.id for a in a_runs}
    assert sorted(e.key for e in witness.entries("done")) == ["t0", "t1", "t2"]
    assert all(store.attempt(e.attempt_id).node_id == "b" for e in witness.entries("done"))


@pytest.mark.parametrize(
    "clock_offset",
    [
        pytest.param(0.0, id="same-clock"),
        # A's own clock ten minutes ahead or behind: the keepers count on the boot clock,
        # the reclaiming node on the database's.
        pytest.param(600.0, id="a-ten-minutes-ahead"),
        pytest.param(-600.0, id="a-ten-minutes-behind"),
    ],
)
def test_a_node_stopped_past_its_lease_has_its_runs_fenced_before_another_runs_them(
    store: Store, nodes: Nodes, witness: Witness, clock_offset: float
) -> None:
    # Given node A running three tasks at the global limit of three, and node B idle,
    ids = submit_three(store, witness, WORK, max_attempts=3)
    a_runs = a_runs_all_then_b_starts(store, nodes, witness, clock_offset=clock_offset)
    # when A is stopped (SIGSTOP) until B, its lease lapsed, has started every task again,
    nodes.freeze("a")
    b_runs_the_copies(store, witness)
    # then no task ever had two processes, nor the line four: A's agents were already
    # gone (its keepers stopped them, A frozen), each before its copy on B started;
    assert_ran_alone(witness)
    assert witness.alive([e.pid for e in on_node(store, witness, "a").values()]) == []
    assert_a_stopped_before_b_started(store, witness)
    # and once A resumes, it records its runs fenced, starts nothing, B finishes them.
    nodes.procs["a"].send_signal(signal.SIGCONT)
    assert_a_fenced_its_runs_and_b_finished_them(store, witness, a_runs, ids)
    assert_ran_alone(witness)


def test_a_stopped_nodes_runs_do_not_complete_while_it_is_stopped(
    store: Store, nodes: Nodes, witness: Witness
) -> None:
    # Given node A running three tasks that are not retried, and node B,
    work = 10.0
    ids = submit_three(store, witness, work, max_attempts=1)
    a_runs = a_runs_all_then_b_starts(store, nodes, witness)
    # when A is stopped until B has ended its runs and until their work would be done,
    nodes.freeze("a")
    stopped = time.monotonic()
    until(lambda: all(store.get(i).status.terminal for i in ids), 60, "b reaps a's runs")
    time.sleep(max(0.0, work + 1 - (time.monotonic() - stopped)))  # the fault's length
    # then none of them did their work in the meantime: their keepers stopped them,
    assert witness.entries("done") == []
    assert witness.alive([e.pid for e in witness.entries("start")]) == []
    # the tasks failed as their node stopped heartbeating, and nothing ran them again;
    assert [store.get(i).status for i in ids] == [Status.FAILED] * LIMIT
    reasons = [store.get(i).attempts[-1].reason or "" for i in ids]
    assert all(r == reaped_reason("a") or "fenced" in r for r in reasons), reasons
    assert [len(store.get(i).attempts) for i in ids] == [1] * LIMIT
    # and A, resumed, records the runs fenced (not completed), starting nothing.
    nodes.procs["a"].send_signal(signal.SIGCONT)
    # A may be between retries (its store backoff doubles up to 10 s) and then reconnects;
    # on a loaded machine that took over 30 s once, so the wait is generous.
    until(lambda: len(fenced_events(store)) == LIMIT, timeout=90, what="a records its runs fenced")
    assert {e.data["attempt"] for e in fenced_events(store)} == {a.id for a in a_runs}
    for run in a_runs:
        assert "[slotline: fenced" in Path(run.log_path or "").read_text()
    assert len(store.attempts()) == LIMIT
    assert witness.entries("done") == []
    assert_ran_alone(witness)


@pytest.fixture
def proxy(pg_url: str, nodes: Nodes) -> Iterator[PausableProxy]:
    """A proxy before the test's database; at the end it lets the nodes reach the
    database to stop (a node cut off would wait for it) before it closes."""
    parts = urlsplit(pg_url)
    forwarding = PausableProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield forwarding
    forwarding.resume()
    nodes.stop_all()
    forwarding.close()


def through(proxy: PausableProxy, url: str) -> str:
    """`url` with the database reached through `proxy`."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{proxy.port}" if user else f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


@pytest.mark.parametrize("cut", ["silent", "closed"])
def test_a_node_cut_off_from_the_database_has_its_runs_fenced_before_another_runs_them(
    store: Store, nodes: Nodes, witness: Witness, proxy: PausableProxy, pg_url: str, cut: str
) -> None:
    # Given node A, which reaches the database through a proxy, running three tasks,
    ids = submit_three(store, witness, WORK, max_attempts=3)
    a_runs = a_runs_all_then_b_starts(store, nodes, witness, url=through(proxy, pg_url))
    # when A cannot reach the database until B has run every task again: no byte passes
    # (its connections hang), or its connections are closed and refused,
    if cut == "silent":
        nodes.between_transactions("a", proxy.pause, proxy.resume)
    else:
        proxy.cut()
    b_runs_the_copies(store, witness)
    # then no task ever had two processes: A lives on, but its agents were gone before
    # their copies started on B,
    assert_ran_alone(witness)
    assert nodes.procs["a"].poll() is None
    assert witness.alive([e.pid for e in on_node(store, witness, "a").values()]) == []
    assert_a_stopped_before_b_started(store, witness)
    # and once the database answers A again, A records its runs fenced, starts nothing.
    proxy.resume()
    assert_a_fenced_its_runs_and_b_finished_them(store, witness, a_runs, ids)
    assert_ran_alone(witness)
    assert nodes.procs["a"].poll() is None


def test_a_node_restarted_within_its_lease_keeps_its_runs(
    store: Store, nodes: Nodes, witness: Witness
) -> None:
    # Given node A running three tasks that work longer than its lease less the margin
    # (so they live on only if the restarted node renews their fence), with a lease long
    # enough for a restart on a loaded machine (a 10 s lease failed once beside the other
    # tests: re-adoption not seen within 30 s; not reproduced since),
    nodes.lease = 20.0
    work = 25.0
    ids = submit_three(store, witness, work, max_attempts=1)
    nodes.start("a")
    until(lambda: len(witness.entries("start")) == LIMIT, 60, "a's agents started")
    # when A is killed (SIGKILL, its agents live on) and started again at once,
    nodes.kill("a")
    nodes.start("a")
    # then it takes its running agents back, and they run to their end, each once.
    until(
        lambda: len([e for e in store.events() if e.data.get("action") == "adopted"]) == LIMIT,
        60,
        "a re-adopts its runs",
    )
    until(lambda: all(store.get(i).status.terminal for i in ids), work + 60, "the line drains")
    assert [store.get(i).status for i in ids] == [Status.SUCCEEDED] * LIMIT
    assert {e.pid for e in witness.entries("done")} == {e.pid for e in witness.entries("start")}
    assert len(store.attempts()) == LIMIT
    assert fenced_events(store) == []
    assert_ran_alone(witness)


def test_runs_whose_node_is_gone_past_its_lease_are_stopped_by_their_keepers(
    store: Store, nodes: Nodes, witness: Witness
) -> None:
    # Given node A, alone, running three tasks,
    nodes.lease = LEASE
    ids = submit_three(store, witness, WORK, max_attempts=1)
    nodes.start("a")
    until(lambda: len(witness.entries("start")) == LIMIT, 60, "a's agents started")
    agents = [e.pid for e in witness.entries("start")]
    # when A is killed (SIGKILL) and nothing takes its place,
    nodes.kill("a")
    killed = time.time()
    # then the keepers stop the agents before another node could reclaim their runs,
    until(lambda: not witness.alive(agents), LEASE + 30, "the keepers stop the agents")
    assert all(witness.seen[pid].last < killed + LEASE + MARGIN for pid in agents)
    assert witness.entries("done") == []
    # and when A comes back, it finds the runs fenced and ends them so.
    nodes.start("a")
    until(lambda: all(store.get(i).status.terminal for i in ids), 60, "a ends the runs")
    assert [store.get(i).status for i in ids] == [Status.FAILED] * LIMIT
    reasons = [store.get(i).attempts[-1].reason or "" for i in ids]
    assert all("fenced" in r for r in reasons), reasons
    reconciled = [e for e in store.events() if e.kind == "reconciled"]
    assert sorted(e.task_id or "" for e in reconciled if e.data["action"] == "fenced") == sorted(
        ids
    )
    assert len(store.attempts()) == LIMIT
    assert witness.entries("done") == []


def test_a_node_resumed_before_anyone_reclaimed_its_runs_ends_them_fenced_and_retries(
    store: Store, nodes: Nodes, witness: Witness
) -> None:
    # Given node A, alone, running three tasks that may be retried once,
    nodes.lease = LEASE
    work = 8.0
    ids = submit_three(store, witness, work, max_attempts=2)
    nodes.start("a")
    until(lambda: len(witness.entries("start")) == LIMIT, 60, "a's agents started")
    first = [e.pid for e in witness.entries("start")]
    # when A is stopped (SIGSTOP) until its keepers have stopped its agents, then resumed,
    nodes.freeze("a")
    until(lambda: not witness.alive(first), LEASE + 30, "the keepers stop the agents")
    assert witness.entries("done") == []
    nodes.procs["a"].send_signal(signal.SIGCONT)
    # then A records its runs fenced (no one had reclaimed them), ends them so, and the
    # tasks' policy runs them again, one process at a time.
    # A may be between retries (its store backoff doubles up to 10 s) and then reconnects;
    # on a loaded machine that took over 30 s once, so the wait is generous.
    until(lambda: len(fenced_events(store)) == LIMIT, timeout=90, what="a records its runs fenced")
    assert {e.data["reclaimed"] for e in fenced_events(store)} == {False}
    until(lambda: all(store.get(i).status.terminal for i in ids), work + 60, "the line drains")
    assert [store.get(i).status for i in ids] == [Status.SUCCEEDED] * LIMIT
    for task_id in ids:
        fenced, retried = store.get(task_id).attempts
        assert "fenced" in (fenced.reason or ""), fenced.reason
        assert retried.node_id == "a"
    assert len(witness.entries("done")) == LIMIT
    assert_ran_alone(witness)
