"""The huey side: the same workloads on SqliteHuey, drained by huey's own thread Consumer."""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from pathlib import Path

from huey import SqliteHuey
from huey.api import TaskWrapper
from huey.storage import SqliteStorage

from bench.stats import gaps_between
from bench.workloads import NOOP, SLEEP, STAMP, Drained


class Tracker:
    """Records each task body's (start, end); sets `done` when the n-th one has run."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.stamps: list[tuple[float, float]] = []
        self.done = threading.Event()
        self._lock = threading.Lock()

    def record(self, started: float, ended: float) -> None:
        with self._lock:
            self.stamps.append((started, ended))
            if len(self.stamps) >= self.n:
                self.done.set()


class NormalSyncStorage(SqliteStorage):
    """huey's SQLite storage at slotline's durability: WAL with synchronous=NORMAL, so a
    commit survives a crashed process but is not fsynced (huey's default is FULL)."""

    def _create_connection(self) -> sqlite3.Connection:
        conn = super()._create_connection()
        conn.execute("PRAGMA synchronous = NORMAL")
        return conn


def make_huey(
    path: Path, tracker: Tracker | None = None, fsync: bool | None = None, normal: bool = False
) -> tuple[SqliteHuey, dict[str, TaskWrapper]]:
    """A SqliteHuey on `path` with default settings and the three benchmark tasks.

    `fsync=None` keeps huey's default; the untimed pre-fill passes False to save time.
    `normal=True` swaps in `NormalSyncStorage` (an extra row of the submit benchmark).
    """
    options: dict[str, object] = {} if fsync is None else {"fsync": fsync}
    if normal:
        options["storage_class"] = NormalSyncStorage
    huey = SqliteHuey(name="bench", filename=str(path), **options)
    seen = tracker or Tracker(0)

    @huey.task(name=NOOP)
    def noop() -> None:
        now = time.time()
        seen.record(now, now)

    @huey.task(name=STAMP)
    def stamp() -> None:
        started = time.time()
        ended = time.time()
        seen.record(started, ended)

    @huey.task(name=SLEEP)
    def sleep(seconds: float) -> None:
        started = time.time()
        subprocess.run(["sleep", f"{seconds:g}"], check=True)
        seen.record(started, time.time())

    return huey, {NOOP: noop, STAMP: stamp, SLEEP: sleep}


def _enqueue(tasks: dict[str, TaskWrapper], workload: str, sleep: float) -> None:
    if workload == SLEEP:
        tasks[SLEEP](sleep)
    else:
        tasks[workload]()


def submit_rate(path: Path, n: int, normal: bool = False) -> float:
    """Tasks per second enqueued one at a time into a fresh SqliteHuey file."""
    huey, tasks = make_huey(path, normal=normal)
    try:
        start = time.perf_counter()
        for _ in range(n):
            tasks[NOOP]()
        return n / (time.perf_counter() - start)
    finally:
        huey.storage.close()


def fill(path: Path, workload: str, n: int, sleep: float = 0.05) -> None:
    """Queue `n` tasks of `workload` (not timed; without fsync to keep the run short)."""
    huey, tasks = make_huey(path, fsync=False)
    try:
        for _ in range(n):
            _enqueue(tasks, workload, sleep)
    finally:
        huey.storage.close()


def drain(path: Path, n: int, workers: int, timeout: float) -> Drained:
    """Start huey's consumer with `workers` threads; time it until the n-th task body ends."""
    tracker = Tracker(n)
    huey, _ = make_huey(path, tracker)
    consumer = huey.create_consumer(workers=workers, worker_type="thread")
    start = time.perf_counter()
    consumer.start()
    finished = tracker.done.wait(timeout)
    seconds = time.perf_counter() - start
    consumer.stop(graceful=True)
    huey.storage.close()
    if not finished:
        raise TimeoutError(f"huey ran {len(tracker.stamps)} of {n} tasks in {timeout:g}s")
    return Drained(seconds, len(tracker.stamps), gaps_between(tracker.stamps))
