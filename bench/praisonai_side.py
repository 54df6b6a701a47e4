"""The PraisonAI side: the same SQLite workloads on PraisonAI's queue (`praisonai_code`'s
`cli/features/queue`: an in-memory priority scheduler, asyncio workers, SQLite behind it).

Runs in PraisonAI's own venv (`bench/peers.py`): `python -m bench.praisonai_side ACTION
PATH [--n N] [--workers K] [--workload W] [--sleep S]` prints one line of JSON.

PraisonAI's worker runs LLM agents only: each run builds a `praisonaiagents.Agent` and
streams its answer. The one change made here is that `Agent` is replaced by a stand-in whose
stream runs the benchmark's task body (a no-op, a time stamp, or `sleep` as a process);
the scheduler, the worker pool and its polling, the SQLite persistence and the recovery of
queued runs at start are PraisonAI's own, with its default settings except the limits (and
`max_queue_size`, 100 by default, raised to hold the workload).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import praisonaiagents
from praisonai_code.cli.features.queue.manager import QueueManager
from praisonai_code.cli.features.queue.models import QueueConfig, QueuedRun

from bench.stats import gaps_between
from bench.workloads import NOOP, SLEEP, STAMP

STAMPS: list[tuple[float, float]] = []


class BenchAgent:
    """Stands in for `praisonaiagents.Agent`: its stream runs the task body named by the
    run's agent name (the workload), with the run's input as the sleep's seconds."""

    def __init__(self, name: str = NOOP, **_: Any) -> None:
        self.name = name
        self.chat_history: list[dict[str, str]] = []

    async def astream(self, content: str) -> AsyncIterator[str]:
        if self.name == STAMP:
            started = time.time()
            STAMPS.append((started, time.time()))
        elif self.name == SLEEP:
            proc = await asyncio.create_subprocess_exec("sleep", content)
            if await proc.wait() != 0:
                raise RuntimeError("sleep failed")
        for chunk in ():  # an async generator that yields no output
            yield chunk

    def chat(self, content: str) -> str:  # the worker's fallback when the stream raises
        raise RuntimeError("the benchmark's task failed")


praisonaiagents.Agent = BenchAgent  # type: ignore[attr-defined]  # what the worker imports


def make_manager(path: Path, limit: int, size: int, on_complete: Any = None) -> QueueManager:
    """A QueueManager on the SQLite file `path` at concurrency `limit` (global, per agent and
    per workspace alike), with room for `size` queued runs."""
    config = QueueConfig(
        max_concurrent_global=limit,
        max_concurrent_per_agent=limit,
        max_concurrent_per_workspace=limit,
        max_queue_size=max(size, 100),
        db_path=str(path),
    )
    return QueueManager(config, on_complete=on_complete)


async def submit_rate(path: Path, n: int) -> float:
    """Runs per second submitted one at a time (`QueueManager.submit`: the in-memory queue
    and one committed row each) into a fresh database, no worker running."""
    manager = make_manager(path, 1, n)
    assert manager.persistence is not None
    manager.persistence.initialize()
    try:
        start = time.perf_counter()
        for _ in range(n):
            await manager.submit("", agent_name=NOOP)
        return n / (time.perf_counter() - start)
    finally:
        manager.persistence.close()


async def fill(path: Path, workload: str, n: int, sleep: float) -> float:
    """Queue `n` runs of `workload` (not timed by the runner), as `submit` does."""
    manager = make_manager(path, 1, n)
    assert manager.persistence is not None
    try:
        for _ in range(n):
            await manager.submit(f"{sleep:g}", agent_name=workload)
    finally:
        manager.persistence.close()
    return 0.0


async def drain(path: Path, n: int, workers: int, timeout: float) -> dict[str, Any]:
    """Start a QueueManager on the pre-filled file (it recovers the queued runs) and time it
    until the n-th run's success is saved; report what the file then counts."""
    done = asyncio.Event()
    completed = 0

    async def on_complete(run_id: str, run: QueuedRun) -> None:  # after its row is saved
        nonlocal completed
        completed += 1
        if completed >= n:
            done.set()

    manager = make_manager(path, workers, n, on_complete)
    start = time.perf_counter()
    await manager.start(recover=True)
    try:
        await asyncio.wait_for(done.wait(), timeout)
        seconds = time.perf_counter() - start
    finally:
        await manager.stop()
    with sqlite3.connect(path) as conn:
        row = conn.execute("SELECT count(*) FROM runs WHERE state = 'succeeded'").fetchone()
    return {"seconds": seconds, "succeeded": int(row[0]), "gaps": gaps_between(STAMPS)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.praisonai_side")
    parser.add_argument("action", choices=("submit", "fill", "drain"))
    parser.add_argument("path", type=Path, help="the SQLite file")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--workload", default=NOOP)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if args.action == "submit":
        result: dict[str, Any] = {"rate": asyncio.run(submit_rate(args.path, args.n))}
    elif args.action == "fill":
        result = {"rate": asyncio.run(fill(args.path, args.workload, args.n, args.sleep))}
    else:
        result = asyncio.run(drain(args.path, args.n, args.workers, args.timeout))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
