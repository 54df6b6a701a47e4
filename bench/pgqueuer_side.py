"""The PgQueuer side: the same PostgreSQL workloads on PgQueuer, drained by its own
`QueueManager` (the worker `pgq run` starts), on asyncpg as `pgq run` picks it when it is
installed, or (`--driver psycopg`) on psycopg 3's async connection.

Runs in PgQueuer's own venv (`bench/peers.py`): `python -m bench.pgqueuer_side ACTION URL
[--n N] [--workers K] [--workload W] [--sleep S]` prints one line of JSON. The URL names a
database of its own (PgQueuer's tables have fixed names); `install` puts PgQueuer's schema
there with its defaults (all tables logged: `durable`).

On psycopg, PgQueuer's driver shares one connection between its queries and a
`notifies(timeout=1.0)` loop, and psycopg holds the connection's lock while it waits for a
notification: with no NOTIFY arriving, each query waits up to a second (a limit-1 drain
measured 2-3 s between jobs). asyncpg delivers notifications without that lock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from pgqueuer import Job, Queries, QueueManager
from pgqueuer.types import QueueExecutionMode

from bench.stats import gaps_between
from bench.workloads import NOOP, SLEEP, STAMP

DRIVER = "asyncpg"  # or "psycopg": set by --driver


@asynccontextmanager
async def connect(url: str) -> AsyncIterator[Queries]:
    """PgQueuer's Queries over one connection of the chosen driver."""
    if DRIVER == "psycopg":
        import psycopg

        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            yield Queries.from_psycopg_connection(conn)
    else:
        import asyncpg

        conn = await asyncpg.connect(url)
        try:
            yield Queries.from_asyncpg_connection(conn)
        finally:
            await conn.close()


async def install(url: str) -> float:
    async with connect(url) as queries:
        await queries.install()
    return 0.0


async def submit_rate(url: str, n: int) -> float:
    """Jobs per second enqueued one at a time (`Queries.enqueue`, one statement each in
    autocommit) into a freshly installed schema."""
    await install(url)
    async with connect(url) as queries:
        start = time.perf_counter()
        for _ in range(n):
            await queries.enqueue(NOOP, None)
        return n / (time.perf_counter() - start)


async def fill(url: str, workload: str, n: int, sleep: float) -> float:
    """Install the schema and queue `n` jobs of `workload` in one batch (not timed)."""
    await install(url)
    payload = f"{sleep:g}".encode()
    async with connect(url) as queries:
        await queries.enqueue([workload] * n, [payload] * n, [0] * n)
    return 0.0


async def drain(url: str, n: int, workers: int, timeout: float) -> dict[str, Any]:
    """Run PgQueuer's QueueManager in drain mode (it returns once the queue is empty and
    its jobs are done) with each entrypoint at `concurrency_limit=workers`; time it from
    `run`'s start, and count the successes its log recorded."""
    stamps: list[tuple[float, float]] = []
    async with connect(url) as queries:
        manager = QueueManager(queries)

        @manager.entrypoint(NOOP, concurrency_limit=workers)
        async def noop(job: Job) -> None:
            return None

        @manager.entrypoint(STAMP, concurrency_limit=workers)
        async def stamp(job: Job) -> None:
            started = time.time()
            stamps.append((started, time.time()))

        @manager.entrypoint(SLEEP, concurrency_limit=workers)
        async def sleep(job: Job) -> None:
            proc = await asyncio.create_subprocess_exec("sleep", (job.payload or b"0").decode())
            if await proc.wait() != 0:
                raise RuntimeError("sleep failed")

        start = time.perf_counter()
        await asyncio.wait_for(
            manager.run(mode=QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=5)),
            timeout,
        )
        seconds = time.perf_counter() - start
    async with connect(url) as queries:
        rows = await queries.driver.fetch(
            "SELECT count(*) AS n FROM pgqueuer_log WHERE status = 'successful'"
        )
    succeeded = int(str(rows[0]["n"]))
    return {"seconds": seconds, "succeeded": succeeded, "gaps": gaps_between(stamps)}


def main(argv: list[str] | None = None) -> int:
    global DRIVER  # noqa: PLW0603  # one driver for the whole child
    parser = argparse.ArgumentParser(prog="python -m bench.pgqueuer_side")
    parser.add_argument("action", choices=("submit", "fill", "drain"))
    parser.add_argument("url", help="a PostgreSQL database of PgQueuer's own")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--workload", default=NOOP)
    parser.add_argument("--sleep", type=float, default=0.05)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--driver", choices=("asyncpg", "psycopg"), default="asyncpg")
    args = parser.parse_args(argv)
    DRIVER = args.driver
    if args.action == "submit":
        result: dict[str, Any] = {"rate": asyncio.run(submit_rate(args.url, args.n))}
    elif args.action == "fill":
        result = {"rate": asyncio.run(fill(args.url, args.workload, args.n, args.sleep))}
    else:
        result = asyncio.run(drain(args.url, args.n, args.workers, args.timeout))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
