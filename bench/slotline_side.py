"""The slotline side: submit into a fresh SQLite store, and drain it with one node."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from bench.stats import gaps_between
from bench.workloads import NOOP, SLEEP, STAMP, Drained
from slotline.node import Node
from slotline.store import open_store


def spec(workload: str, sleep: float = 0.05) -> dict[str, Any]:
    """The task dict slotline is given for one task of `workload`."""
    if workload == SLEEP:
        return {"command": ["sleep", f"{sleep:g}"]}
    return {"callable": workload}


def submit_rate(path: Path, n: int) -> float:
    """Tasks per second submitted one at a time (one transaction each) into a fresh store."""
    store = open_store(path)
    try:
        start = time.perf_counter()
        for _ in range(n):
            store.submit({"command": ["true"]})
        return n / (time.perf_counter() - start)
    finally:
        store.close()


def submit_many_rate(path: Path, n: int) -> float:
    """Tasks per second submitted as one `submit_many` batch into a fresh store."""
    store = open_store(path)
    try:
        specs = [{"command": ["true"]} for _ in range(n)]
        start = time.perf_counter()
        store.submit_many(specs)
        return n / (time.perf_counter() - start)
    finally:
        store.close()


def fill(path: Path, workload: str, n: int, limit: int, sleep: float = 0.05) -> None:
    """Queue `n` tasks of `workload` and set the limit (not timed: one batch)."""
    store = open_store(path)
    try:
        store.set_setting("max_concurrent", limit)
        store.submit_many([spec(workload, sleep) for _ in range(n)])
    finally:
        store.close()


def drain(path: Path, timeout: float) -> Drained:
    """Run one node on the pre-filled store until it is idle; time it from node start."""
    stamps: list[tuple[float, float]] = []
    lock = threading.Lock()

    def noop() -> None:
        return None

    def stamp() -> None:
        started = time.time()
        ended = time.time()
        with lock:
            stamps.append((started, ended))

    store = open_store(path)
    try:
        node = Node(store, log_dir=path.parent / "logs", callables={NOOP: noop, STAMP: stamp})

        async def timed() -> float:
            start = time.perf_counter()
            await node.run_until_idle(timeout)
            return time.perf_counter() - start

        seconds = asyncio.run(timed())
        attempts = store.attempts()
        succeeded = store.counts().get("succeeded", 0)
    finally:
        store.close()
    store_gaps = []
    if stamps:  # the hand-off workload: also read the gaps the store recorded
        store_gaps = gaps_between(
            (a.started_at, a.finished_at) for a in attempts if a.finished_at is not None
        )
    return Drained(seconds, succeeded, gaps_between(stamps), store_gaps)
