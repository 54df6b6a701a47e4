"""Steering verbs racing each other, or racing a run's end, on real stores.

Two worker processes, each with its own store connection on the same URL, make their
call at the same moment, round after round. Each round is a real race, and the test
checks it: the test holds the store's write lock while both calls start, waits until
both are blocked on it (PostgreSQL's pg_locks shows two waiters; with SQLite both
processes sleep in the busy handler), then lets go. Whichever commits first, the outcome
is one of the legal ones, never a mix (a cancelled task with a live attempt, a task
started twice, two ends).
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from slotline.errors import InvalidTransition, StaleAttempt
from slotline.models import TERMINAL, Status, Task
from slotline.stops import CANCEL
from slotline.store import Claim, Store, open_store
from slotline.store.pg_url import lock_key, split_url
from waiting import until

ROUNDS = 8
NODE_A, NODE_B = "node-a", "node-b"
Call = tuple[Any, ...]  # (verb, *args): see `act`


def asleep_in_busy_handler(pid: int) -> bool:
    """SQLite has no lock table: a writer that found the file locked sleeps in its busy
    handler, which the kernel shows as the process's wait channel."""
    wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    if wchan in ("", "0"):  # hidden from this user: asleep is the most one can see
        return bool(psutil.Process(pid).status() == psutil.STATUS_SLEEPING)
    return "nanosleep" in wchan


class Gate:
    """Holds the store's write lock, as a long transaction would, and tells whether
    given processes are all waiting for it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite: sqlite3.Connection | None = None
        self.pg: psycopg.Connection[Any] | None = None
        if "://" in url:
            conninfo, schema = split_url(url)
            key = lock_key(schema)
            self.lock_id = ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF)  # as pg_locks shows it
            self.pg = psycopg.connect(conninfo)
            self.pg.execute("SELECT pg_advisory_xact_lock(%s)", [key])
            self.watch = psycopg.connect(conninfo, autocommit=True)
        else:
            self.sqlite = sqlite3.connect(url, isolation_level=None)
            self.sqlite.execute("BEGIN IMMEDIATE")

    def waiting(self, pids: list[int]) -> bool:
        if self.pg is not None:
            (count,) = self.watch.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND classid = %s::oid AND objid = %s::oid AND objsubid = 1",
                self.lock_id,
            ).fetchone() or (0,)
            return bool(count == len(pids))
        return all(asleep_in_busy_handler(pid) for pid in pids)

    def release(self) -> None:
        if self.pg is not None:
            self.pg.rollback()
            self.pg.close()
            self.watch.close()
        elif self.sqlite is not None:
            self.sqlite.execute("ROLLBACK")
            self.sqlite.close()


def act(store: Store, verb: str, *args: Any) -> list[str] | None:
    """One side's call; returns the ids of attempts it started, if any."""
    if verb == "start_now":  # "start now": bump, then the node's next claim starts it
        task_id, node = args
        store.bump(task_id)
        return [c.attempt.id for c in store.claim(node).claims if c.task.id == task_id]
    if verb == "cancel":
        store.cancel(args[0])
    elif verb == "finish":
        store.finish(*args)
    elif verb == "restart":
        store.restart(args[0], force=True)
    elif verb == "terminate":
        store.terminate(args[0], "stuck")
    else:
        raise ValueError(verb)
    return None


def side(pipe: Connection, barrier: Barrier) -> None:
    """A worker process: for each (url, call) it receives, wait for the other side at
    the barrier, make the call and send back what happened."""
    stores: dict[str, Store] = {}
    while (job := pipe.recv()) is not None:
        url, call = job
        store = stores.get(url) or stores.setdefault(url, open_store(url))
        barrier.wait(timeout=30)
        try:
            result: Any = ("ok", act(store, *call))
        except (InvalidTransition, StaleAttempt) as exc:  # a refusal is a legal outcome
            result = ("refused", str(exc))
        pipe.send(result)
    for store in stores.values():
        store.close()


@dataclass
class Side:
    """What one side of a race got: the attempts its call started, or its refusal."""

    started: list[str] | None
    refused: str | None


class Racer:
    """Two worker processes that make two calls at once."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.barrier = ctx.Barrier(2)  # kept: the children find it by name
        self.pipes: list[Connection] = []
        self.procs = []
        for n in range(2):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=side, args=(theirs, self.barrier), name=f"racer-{n}")
            proc.start()
            self.pipes.append(mine)
            self.procs.append(proc)
        self.url = ""

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for proc in self.procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()

    def race(self, first: Call, second: Call) -> tuple[Side, Side]:
        """Both calls, started while the write lock is held, let go once both wait."""
        gate = Gate(self.url)
        try:
            for pipe, call in zip(self.pipes, (first, second), strict=True):
                pipe.send((self.url, call))
            pids = [proc.pid or 0 for proc in self.procs]
            until(lambda: gate.waiting(pids), what="both calls waiting for the write lock")
        finally:
            gate.release()
        return self._result(self.pipes[0]), self._result(self.pipes[1])

    @staticmethod
    def _result(pipe: Connection) -> Side:
        assert pipe.poll(60), "a racer did not answer"
        outcome, value = pipe.recv()
        return Side(value, None) if outcome == "ok" else Side(None, value)


@pytest.fixture(scope="module")
def racers() -> Iterator[Racer]:
    made = Racer()
    yield made
    made.close()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with closing(open_store(store_url)) as opened:
        opened.set_setting("max_concurrent", 100)
        yield opened


@pytest.fixture
def racer(racers: Racer, store_url: str, store: Store) -> Racer:
    racers.url = store_url
    return racers


def running(store: Store, node: str = NODE_A) -> Claim:
    """A fresh task, claimed: running, with its attempt."""
    task = store.submit({"command": ["true"]})
    (claim,) = [c for c in store.claim(node).claims if c.task.id == task.id]
    return claim


def ends(store: Store, task: Task) -> list[str]:
    """The statuses `task` ended in, by its events: one end each time it ended."""
    ended = {s.value for s in TERMINAL}
    events = store.events(limit=100_000)
    return [e.data["to"] for e in events if e.task_id == task.id and e.data.get("to") in ended]


def test_cancel_racing_bump_and_start_one_wins(store: Store, racer: Racer) -> None:
    # Given a queued task that cannot start on its own (the pool is closed),
    store.set_setting("max_concurrent", 0)
    for _ in range(ROUNDS):
        task = store.submit({"command": ["true"]})
        # when one side cancels it while another node starts it now,
        cancel, start = racer.race(("cancel", task.id), ("start_now", task.id, NODE_B))
        # then exactly one won: it runs (and the cancel became a stop request for its
        # process), or it was cancelled and never got an attempt.
        after = store.get(task.id)
        assert cancel.refused is None
        if start.started:
            assert (after.status, after.kill_request) == (Status.RUNNING, CANCEL)
            assert [a.id for a in after.attempts] == start.started
            attempt = after.attempts[0]
            store.finish(attempt.id, attempt.token, -15)
            assert store.get(task.id).status is Status.CANCELLED
        else:
            assert after.status is Status.CANCELLED
            assert after.attempts == ()
            assert store.claim(NODE_A).claims == []
        assert ends(store, task) == ["cancelled"]


def test_cancel_racing_a_natural_end_ends_the_task_once(store: Store, racer: Racer) -> None:
    for _ in range(ROUNDS):
        claim = running(store)
        task, attempt = claim.task, claim.attempt
        cancel, finish = racer.race(("cancel", task.id), ("finish", attempt.id, attempt.token, 0))
        # Either the run ended first (succeeded; the cancel is refused: it already
        # ended) or the cancel did (the end is then recorded as the cancellation).
        after = store.get(task.id)
        assert finish.refused is None
        assert after.status is (Status.SUCCEEDED if cancel.refused else Status.CANCELLED)
        assert after.kill_request is None
        assert ends(store, task) == [after.status.value]
        assert store.kill_requests(NODE_A) == []


def test_restart_racing_an_end_queues_the_task_once(store: Store, racer: Racer) -> None:
    for _ in range(ROUNDS):
        claim = running(store)
        task, attempt = claim.task, claim.attempt
        restart, finish = racer.race(("restart", task.id), ("finish", attempt.id, attempt.token, 1))
        # Whichever came first, the task is back in line once, nothing pending on it,
        assert (restart.refused, finish.refused) == (None, None)
        after = store.get(task.id)
        assert after.status is Status.QUEUED
        assert (after.kill_request, after.restart_requested) == (None, False)
        assert [a.finished_at is not None for a in after.attempts] == [True]
        # and it runs again exactly once.
        again = [c for c in store.claim(NODE_A).claims if c.task.id == task.id]
        assert len(again) == 1
        store.finish(again[0].attempt.id, again[0].attempt.token, 0)
        assert store.get(task.id).status is Status.SUCCEEDED


def test_terminate_racing_an_exit_fails_or_succeeds_never_both(store: Store, racer: Racer) -> None:
    for _ in range(ROUNDS):
        claim = running(store)
        task, attempt = claim.task, claim.attempt
        terminate, finish = racer.race(
            ("terminate", task.id), ("finish", attempt.id, attempt.token, 0)
        )
        after = store.get(task.id)
        assert finish.refused is None
        if terminate.refused:  # the exit came first: it succeeded
            assert after.status is Status.SUCCEEDED
        else:  # the terminate came first: the exit is recorded as the termination
            assert after.status is Status.FAILED
            assert after.failure_reason == "terminated: stuck"
        assert ends(store, task) == [after.status.value]
        assert store.kill_requests(NODE_A) == []


def test_two_nodes_starting_one_task_now_start_it_once(store: Store, racer: Racer) -> None:
    store.set_setting("max_concurrent", 0)
    for _ in range(ROUNDS):
        task = store.submit({"command": ["true"]})
        a, b = racer.race(("start_now", task.id, NODE_A), ("start_now", task.id, NODE_B))
        # One attempt, started by one node; the other's bump was refused (it already
        # runs) or its claim found nothing left to start.
        started = [*(a.started or []), *(b.started or [])]
        after = store.get(task.id)
        assert [x.id for x in after.attempts] == started
        assert len(started) == 1
        assert after.status is Status.RUNNING
        assert after.attempts[0].over_limit
        for side_ in (a, b):
            assert side_.refused is None or "already running" in side_.refused
        store.finish(after.attempts[0].id, after.attempts[0].token, 0)
