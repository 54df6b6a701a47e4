"""slotline on PostgreSQL against procrastinate, the same workloads in the same run.

.venv/bin/python bench/pg.py                # full sizes, 5 runs per side
.venv/bin/python bench/pg.py --quick        # small sizes, 1 run
.venv/bin/python bench/pg.py --url postgresql://postgres@127.0.0.1:5432/test --json out.json

Each measurement gets a fresh queue: slotline a schema of its own, procrastinate a database
of its own (its schema has fixed names), both dropped afterwards. Needs `pip install
'.[bench]'` (procrastinate) and a PostgreSQL server where the user may create databases.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench import floors, slotline_side
from bench.child import PG_SIDES, run_child
from bench.machine import busy_cores, busy_jiffies, describe, load_average
from bench.stats import median, percentile
from bench.workloads import FULL, NOOP, QUICK, SLEEP, STAMP, Sizes
from slotline.store import open_store

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
CHILD_TIMEOUT = 240.0
NODES = 3  # the several-nodes drain: this many nodes, each with `drain_limit` slots


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def fresh(side: str, base: str) -> Iterator[str]:
    """A URL to an empty queue for `side`, dropped afterwards."""
    name = f"bench_{secrets.token_hex(5)}"
    if side == "slotline":
        try:
            yield f"{base}?schema={name}"
        finally:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        return
    parts = urlsplit(base)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fill(side: str, url: str, workload: str, n: int, limit: int, sleep: float) -> None:
    if side == "slotline":
        slotline_side.fill(url, workload, n, limit, sleep)
    else:
        from bench import procrastinate_side  # procrastinate: the bench extra, when it runs

        procrastinate_side.fill(url, workload, n, sleep)


def drain(
    side: str, base: str, folder: Path, workload: str, n: int, limit: int, sleep: float
) -> dict[str, Any]:
    with fresh(side, base) as url:
        fill(side, url, workload, n, limit, sleep)
        result = run_child(side, "drain", folder, CHILD_TIMEOUT, url=url, n=n, workers=limit)
    if result["succeeded"] != n:
        raise RuntimeError(f"{side}: only {result['succeeded']} of {n} {workload} tasks succeeded")
    return result


def floor_rate(base: str, n: int) -> float:
    """Rows per second of the least any durable submit does (`bench/floors.py`): no queue
    that commits each task before it answers submits faster here."""
    return floors.pg_insert_rate(base, n)


def several_nodes(base: str, folder: Path, n: int, nodes: int, slots: int) -> tuple[float, float]:
    """Seconds for `nodes` slotline nodes (each with `slots` slots, in processes of their
    own) to drain `n` no-ops from one store, from the first node's start to the last
    node's end; and how many cores the machine kept busy meanwhile (all of it: the
    nodes, the server, anything else)."""
    with fresh("slotline", base) as url:
        slotline_side.fill(url, NOOP, n, slots * nodes, 0)
        argv = [sys.executable, "-m", "bench.child", "slotline", "drain", str(folder),
                f"--url={url}", f"--slots={slots}", f"--timeout={CHILD_TIMEOUT}"]  # fmt: skip
        start, jiffies = time.perf_counter(), busy_jiffies()
        root = Path(__file__).resolve().parent.parent
        pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        procs = [subprocess.Popen(argv, cwd=root, text=True, **pipes) for _ in range(nodes)]
        for proc in procs:
            _, err = proc.communicate(timeout=CHILD_TIMEOUT + 30)
            if proc.returncode != 0:
                raise RuntimeError(f"a slotline node failed:\n{err[-3000:]}")
        seconds, busy = time.perf_counter() - start, busy_cores(jiffies, busy_jiffies())
        store = open_store(url)
        try:
            succeeded = store.counts().get("succeeded", 0)
        finally:
            store.close()
    if succeeded != n:
        raise RuntimeError(f"{nodes} slotline nodes ran only {succeeded} of {n} no-ops")
    return seconds, busy


def one_run(sizes: Sizes, order: tuple[str, ...], base: str, folder: Path) -> dict[str, float]:
    sample: dict[str, float] = {}
    for side in order:
        with fresh(side, base) as url:
            result = run_child(side, "submit", folder, CHILD_TIMEOUT, url=url, n=sizes.submit)
        sample[f"{side}.submit"] = result["rate"]
    sample["floor.submit"] = floor_rate(base, sizes.submit)
    for side in order:
        result = drain(side, base, folder, NOOP, sizes.drain, sizes.drain_limit, sizes.sleep)
        sample[f"{side}.drain_rate"] = sizes.drain / result["seconds"]
    for side in order:
        result = drain(side, base, folder, SLEEP, sizes.procs, sizes.procs_limit, sizes.sleep)
        sample[f"{side}.procs_ratio"] = result["seconds"] / sizes.ideal_procs_seconds()
    for side in order:
        result = drain(side, base, folder, STAMP, sizes.handoff, 1, sizes.sleep)
        sample[f"{side}.handoff_p50_ms"] = percentile(result["gaps"], 50) * 1000
        sample[f"{side}.handoff_p99_ms"] = percentile(result["gaps"], 99) * 1000
    n = sizes.drain
    one, one_busy = several_nodes(base, folder, n, 1, sizes.drain_limit)
    many, many_busy = several_nodes(base, folder, n, NODES, sizes.drain_limit)
    sample["slotline.one_node_rate"] = n / one
    sample["slotline.nodes_rate"] = n / many
    sample["slotline.nodes_speedup"] = one / many
    sample["slotline.one_node_busy_cores"] = one_busy
    sample["slotline.nodes_busy_cores"] = many_busy
    return sample


ROWS = [
    # (label, metric, better)
    ("submit, one at a time (tasks/s)", "submit", "higher"),
    ("drain no-ops at limit 4 (tasks/s)", "drain_rate", "higher"),
    ("200 × sleep 0.05 at limit 8, wall / ideal", "procs_ratio", "lower"),
    ("hand-off at limit 1, p50 ms", "handoff_p50_ms", "lower"),
    ("hand-off at limit 1, p99 ms", "handoff_p99_ms", "lower"),
]


def render(medians: dict[str, float], samples: list[dict[str, float]]) -> str:
    def spread(key: str) -> str:
        values = [s[key] for s in samples]
        return f"{min(values):,.2f}–{max(values):,.2f}"

    lines = [
        "| workload | slotline (PG) | procrastinate | ratio | better |",
        "|---|---:|---:|---:|---|",
    ]
    for label, metric, better in ROWS:
        ours, theirs = medians[f"slotline.{metric}"], medians[f"procrastinate.{metric}"]
        ratio = ours / theirs
        lines.append(
            f"| {label} | {ours:,.2f} ({spread('slotline.' + metric)}) | "
            f"{theirs:,.2f} ({spread('procrastinate.' + metric)}) | {ratio:.2f} | {better} |"
        )
    lines.append(
        f"| {NODES} nodes against one, no-ops (tasks/s) | {medians['slotline.nodes_rate']:,.0f} "
        f"vs {medians['slotline.one_node_rate']:,.0f} | — | "
        f"{medians['slotline.nodes_speedup']:.2f} ({spread('slotline.nodes_speedup')}) | higher |"
    )
    cores = os.cpu_count() or 1
    floor, theirs = medians["floor.submit"], medians["procrastinate.submit"]
    return "\n".join(lines) + (
        f"\n\nThe floor of a submit here (one prepared one-row INSERT per commit, "
        f"{spread('floor.submit')}): {floor:,.0f}/s, {floor / theirs:.2f}× procrastinate's "
        f"submit.\nCores busy (of {cores}) while the nodes drained: "
        f"{medians['slotline.one_node_busy_cores']:.2f} with one node, "
        f"{medians['slotline.nodes_busy_cores']:.2f} with {NODES}."
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/pg.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; 1 repeat by default")
    parser.add_argument("--repeat", type=int, default=None, help="runs per side (default 5)")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"the server (default {DEFAULT_URL})")
    parser.add_argument("--json", type=Path, help="also write every run's raw values here")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat or (1 if args.quick else 5)
    machine = describe(Path(__file__).resolve().parent.parent)
    began = time.perf_counter()
    samples = []
    with tempfile.TemporaryDirectory(prefix="slotline-pgbench-") as tmp:
        for index in range(repeat):
            order = PG_SIDES if index % 2 == 0 else PG_SIDES[::-1]
            folder = Path(tmp) / f"run-{index + 1}"
            folder.mkdir()
            log(f"run {index + 1}/{repeat} ({' then '.join(order)})…")
            samples.append(one_run(sizes, order, args.url, folder))
    medians = {key: median(s[key] for s in samples) for key in samples[0]}
    machine["load average at end"] = load_average()
    elapsed = time.perf_counter() - began
    mode = "quick" if args.quick else "full"
    print(f"{mode} sizes, median of {repeat} run(s), {elapsed:.0f} s\n")
    print("\n".join(f"- {key}: {value}" for key, value in machine.items()) + "\n")
    print(render(medians, samples))
    if args.json:
        payload = {"machine": machine, "sizes": dataclasses.asdict(sizes), "repeat": repeat}
        payload |= {"runs": samples, "medians": medians}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
