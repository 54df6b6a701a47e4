"""The slotline side: submit into a fresh SQLite store, and drain it with one node."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.stats import gaps_between
from bench.workloads import NOOP, SLEEP, STAMP, Drained
from slotline.models import TERMINAL
from slotline.node.node import Node
from slotline.store import open_store


def spec(workload: str, sleep: float = 0.05) -> dict[str, Any]:
    """The task dict slotline is given for one task of `workload`."""
    if workload == SLEEP:
        return {"command": ["sleep", f"{sleep:g}"]}
    return {"callable": workload}


def submit_rate(path: Path | str, n: int) -> float:
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


def fill(path: Path | str, workload: str, n: int, limit: int, sleep: float = 0.05) -> None:
    """Queue `n` tasks of `workload` and set the limit (not timed: one batch)."""
    store = open_store(path)
    try:
        store.set_setting("max_concurrent", limit)
        store.submit_many([spec(workload, sleep) for _ in range(n)])
    finally:
        store.close()


def drain(
    path: Path | str, timeout: float, log_dir: Path | None = None, slots: int | None = None
) -> Drained:
    """Run one node on the pre-filled store until it is idle; time it from node start.

    `path` is the SQLite file or a PostgreSQL URL (then `log_dir` is required); `slots`
    caps this node's runs (several nodes sharing one store)."""
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
        logs = log_dir or Path(path).parent / "logs"
        callables = {NOOP: noop, STAMP: stamp}
        name = f"bench-{os.getpid()}"  # several nodes may share a PostgreSQL store
        node = Node(store, node_id=name, log_dir=logs, callables=callables, slots=slots)

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


ROOT = Path(__file__).resolve().parent.parent


def drain_served(path: Path, timeout: float) -> Drained:
    """Drain the pre-filled store with `slotline serve --app bench.app:app` (a node process,
    its no-ops in worker processes); timed from the node's first line (it is up) to the
    last run's end as the store recorded it. `peak_rss_kb` is the node process's."""
    argv = [sys.executable, "-m", "slotline", "--store", str(path), "serve", "--no-http",
            "--node-id", "bench", "--app", "bench.app:app", "--sample-interval", "0"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    node = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    store = open_store(path)
    try:
        assert node.stdout is not None
        node.stdout.readline()
        start = time.time()
        deadline = time.monotonic() + timeout
        total = sum(store.counts().values())
        while sum(n for s, n in store.counts().items() if s in TERMINAL) < total:
            if time.monotonic() > deadline or node.poll() is not None:
                raise RuntimeError(f"the node did not drain {path} in {timeout:g}s")
            time.sleep(0.05)
        rss = _peak_rss_kb(node.pid)
        attempts = store.attempts()
        succeeded = store.counts().get("succeeded", 0)
    finally:
        node.send_signal(signal.SIGTERM)
        node.communicate(timeout=60)
        store.close()
    end = max(a.finished_at or 0.0 for a in attempts)
    return Drained(end - start, succeeded, node_rss_kb=rss)


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0
