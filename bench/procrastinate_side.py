"""The procrastinate side: the same workloads on procrastinate (PostgreSQL), drained by its
own worker, each in a database of its own."""

from __future__ import annotations

import asyncio
import time

from procrastinate import App, PsycopgConnector

from bench.stats import gaps_between
from bench.workloads import NOOP, SLEEP, STAMP, Drained

QUEUE = "bench"


def make_app(url: str, stamps: list[tuple[float, float]] | None = None) -> App:
    """A procrastinate App on `url` with the three benchmark tasks in their native (async)
    form, which is procrastinate's fastest."""
    app = App(connector=PsycopgConnector(conninfo=url))
    seen = stamps if stamps is not None else []

    @app.task(name=NOOP, queue=QUEUE)
    async def noop() -> None:
        return None

    @app.task(name=STAMP, queue=QUEUE)
    async def stamp() -> None:
        started = time.time()
        seen.append((started, time.time()))

    @app.task(name=SLEEP, queue=QUEUE)
    async def sleep(seconds: float) -> None:
        proc = await asyncio.create_subprocess_exec("sleep", f"{seconds:g}")
        if await proc.wait() != 0:
            raise RuntimeError("sleep failed")

    return app


def apply_schema(url: str) -> None:
    app = make_app(url)
    with app.open():
        app.schema_manager.apply_schema()


def _defer(app: App, workload: str, sleep: float) -> None:
    task = app.tasks[workload]
    if workload == SLEEP:
        task.defer(seconds=sleep)
    else:
        task.defer()


def submit_rate(url: str, n: int) -> float:
    """Jobs per second deferred one at a time (procrastinate's sync `defer`)."""
    apply_schema(url)
    app = make_app(url)
    with app.open():
        start = time.perf_counter()
        for _ in range(n):
            _defer(app, NOOP, 0)
        return n / (time.perf_counter() - start)


def fill(url: str, workload: str, n: int, sleep: float = 0.05) -> None:
    apply_schema(url)
    app = make_app(url)
    with app.open():
        for _ in range(n):
            _defer(app, workload, sleep)


def drain(url: str, n: int, workers: int, timeout: float) -> Drained:
    """Run procrastinate's worker at `workers` concurrency until the queue is empty
    (`wait=False`); time it from the worker's start."""
    stamps: list[tuple[float, float]] = []
    app = make_app(url, stamps)

    async def timed() -> float:
        async with app.open_async():
            start = time.perf_counter()
            await asyncio.wait_for(
                app.run_worker_async(
                    queues=[QUEUE], concurrency=workers, wait=False, install_signal_handlers=False
                ),
                timeout,
            )
            return time.perf_counter() - start

    seconds = asyncio.run(timed())
    succeeded = _count_succeeded(url)
    return Drained(seconds, succeeded, gaps_between(stamps))


def _count_succeeded(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()
    return int(row[0]) if row else 0
