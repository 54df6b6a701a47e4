"""The scale workload: what reads, a submit and a node cost behind 0, 10,000 and 100,000
queued tasks, on SQLite and (with --postgres URL) on PostgreSQL.

.venv/bin/python bench/scale.py                      # SQLite, 0 / 10k / 100k queued
.venv/bin/python bench/scale.py --sizes 0,10000      # other backlogs
.venv/bin/python bench/scale.py --postgres postgresql://postgres@127.0.0.1:5432/test

Each backlog is a fresh store filled with no-op callables in batches (not timed; on
PostgreSQL followed by `VACUUM ANALYZE tasks`, as autovacuum would do within a minute, so
that the planner knows the table's size). Each read or submit is timed alone,
`--repeat` times, and the median is reported with the range. Then 3,000 no-op callables
are submitted at high priority, ahead of the backlog, and a node runs in a child process
for `--node-seconds` at limit 4; it reports the tasks it finished per second and its
peak RSS (VmHWM).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.child import ROOT, peak_rss_kb
from bench.machine import load_average
from bench.stats import median
from bench.workloads import NOOP

# What `slotline status` shows by default: the head of the line.
STATUS_HEAD = 20
FILL_BATCH = 10_000
# Tasks put ahead of the backlog for the node to run: more than it runs in the time.
AHEAD = 3_000


def timed(call: Callable[[], object], repeat: int) -> list[float]:
    """Milliseconds of each of `repeat` calls."""
    found = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        found.append((time.perf_counter() - start) * 1000)
    return found


def fill(url: str, n: int, priority: str = "normal") -> None:
    from slotline.store import open_store

    store = open_store(url)
    try:
        store.set_setting("max_queue_size", 10_000_000)
        store.set_setting("max_concurrent", 4)
        for first in range(0, n, FILL_BATCH):
            batch = min(FILL_BATCH, n - first)
            store.submit_many([{"callable": NOOP, "priority": priority} for _ in range(batch)])
    finally:
        store.close()
    if url.startswith("postgresql://"):
        import psycopg

        from slotline.store.pg_url import split_url

        conninfo, schema = split_url(url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'VACUUM ANALYZE "{schema}".tasks')


def reads(url: str, repeat: int) -> dict[str, list[float]]:
    """Status of the head, a task's position, a submit, and a read with its ETA."""
    from slotline.store import open_store

    store = open_store(url)
    try:
        tail = store.submit({"callable": NOOP})  # the worst case: the last in line
        found = {
            "status_head_ms": timed(lambda: store.status(limit=STATUS_HEAD), repeat),
            "position_ms": timed(lambda: store.get(tail.id, estimate=False), repeat),
            "submit_ms": timed(lambda: store.submit({"callable": NOOP}), repeat),
        }
        # Each submit before it is a change, so every read below simulates the line anew.
        eta = []
        for _ in range(3):
            store.submit({"callable": NOOP})
            eta += timed(lambda: store.get(tail.id), 1)
        found["get_with_eta_ms"] = eta
        found.update(lists(store, repeat))
        return found
    finally:
        store.close()


def lists(store: Any, repeat: int) -> dict[str, list[float]]:
    """Pages of 100 of the task list (what `slotline ls` and GET /api/tasks read), after
    a change so that no ETA is cached: the first page oldest first (the head of the line),
    newest first (its tail: positions near 100,000), the next page, a page with the count
    of all matches, and a page of a filter that matches one task in 1,000."""
    from slotline.taskfilter import ListQuery, TaskFilter

    rare = TaskFilter(status=["queued"], agent="rare")
    for _ in range(3):
        store.submit({"callable": NOOP, "agent": "rare"})

    def fresh(**options: Any) -> Callable[[], object]:
        def read() -> object:
            store.submit({"callable": NOOP})  # a change: estimates are made anew
            start = time.perf_counter()
            store.list_page(ListQuery(limit=100, **options))
            return time.perf_counter() - start

        return read

    first = store.list_page(ListQuery(limit=100)).next_after
    found = {}
    for name, options in {
        "list_first_ms": {},
        "list_newest_ms": {"newest": True},
        "list_next_ms": {"after": first},
        "list_count_ms": {"count": True},
        "list_rare_ms": {"wanted": rare},
    }.items():
        read = fresh(**options)
        found[name] = [float(read()) * 1000 for _ in range(repeat)]  # type: ignore[arg-type]
    return found


def node_child(url: str, seconds: float) -> dict[str, float]:
    """Run one node for `seconds` (in this child process); tasks finished per second."""
    from slotline.node.node import Node
    from slotline.store import open_store

    store = open_store(url)
    try:
        before = store.counts().get("succeeded", 0)
        logs = Path(tempfile.mkdtemp(prefix="slotline-scale-logs-"))
        node = Node(store, log_dir=logs, callables={NOOP: lambda: None}, sample_interval=0)

        async def run() -> None:
            stop = asyncio.Event()
            asyncio.get_running_loop().call_later(seconds, stop.set)
            await node.run(stop)

        asyncio.run(run())
        done = store.counts().get("succeeded", 0) - before
    finally:
        store.close()
    return {"rate": done / seconds, "peak_rss_mib": peak_rss_kb() / 1024}


def node_rate(url: str, seconds: float) -> dict[str, float]:
    argv = [sys.executable, "bench/scale.py", "--node", url, f"--node-seconds={seconds}"]
    proc = subprocess.run(
        argv, cwd=ROOT, capture_output=True, text=True, timeout=seconds + 120, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"node child failed:\n{proc.stderr[-3000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def store_url(backend: str, folder: Path, size: int, postgres: str | None) -> str:
    if backend == "sqlite":
        return str(folder / f"scale-{size}.db")
    assert postgres is not None
    joiner = "&" if "?" in postgres else "?"
    return f"{postgres}{joiner}schema=scale_{size}_{secrets.token_hex(3)}"


def drop_schema(url: str) -> None:
    import psycopg

    from slotline.store.pg_url import split_url

    conninfo, schema = split_url(url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def measure(backend: str, size: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    url = store_url(backend, folder, size, args.postgres)
    try:
        fill(url, size)
        result: dict[str, Any] = {"backend": backend, "queued": size}
        for name, values in reads(url, args.repeat).items():
            result[name] = (median(values), min(values), max(values))
        if args.node_seconds > 0:
            fill(url, AHEAD, "high")
            result["node"] = node_rate(url, args.node_seconds)
        return result
    finally:
        if backend == "postgres":
            drop_schema(url)


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "| store | queued | `status` (head of 20) ms | position ms | submit ms "
        "| `get` with ETA ms | node tasks/s (limit 4) | node peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        cell = functools.partial(_cell, r)
        node = r.get("node", {"rate": float("nan"), "peak_rss_mib": float("nan")})
        lines.append(
            f"| {r['backend']} | {r['queued']:,} | {cell('status_head_ms')} "
            f"| {cell('position_ms')} | {cell('submit_ms')} | {cell('get_with_eta_ms')} "
            f"| {node['rate']:,.0f} | {node['peak_rss_mib']:.1f} |"
        )
    lines += [
        "",
        "| store | queued | list: first page ms | newest first ms | next page ms "
        "| with count ms | 1 in 1,000 matches ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        cell = functools.partial(_cell, r)
        lines.append(
            f"| {r['backend']} | {r['queued']:,} | {cell('list_first_ms')} "
            f"| {cell('list_newest_ms')} | {cell('list_next_ms')} | {cell('list_count_ms')} "
            f"| {cell('list_rare_ms')} |"
        )
    return "\n".join(lines)


def _cell(result: dict[str, Any], name: str) -> str:
    mid, low, high = result[name]
    return f"{mid:.2f} ({low:.2f}–{high:.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/scale.py")
    parser.add_argument("--sizes", default="0,10000,100000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--node-seconds", type=float, default=5.0, help="0: no node run")
    parser.add_argument("--postgres", help="also run on this PostgreSQL database")
    parser.add_argument("--node", help=argparse.SUPPRESS)  # the child: run a node on it
    parser.add_argument("--json", type=Path, help="write every raw value here")
    args = parser.parse_args()
    if args.node:
        print(json.dumps(node_child(args.node, args.node_seconds)))
        return 0
    backends = ["sqlite"] + (["postgres"] if args.postgres else [])
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average at start: {load_average()}", file=sys.stderr)
    results = []
    with tempfile.TemporaryDirectory(prefix="slotline-scale-") as folder:
        for backend in backends:
            for size in sizes:
                print(f"{backend}, {size:,} queued…", file=sys.stderr, flush=True)
                results.append(measure(backend, size, args, Path(folder)))
    print(f"load average at end: {load_average()}", file=sys.stderr)
    print(render(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
