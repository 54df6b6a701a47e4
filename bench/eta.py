"""ETAs: what a refresh costs with 10,000 queued, and how close the estimate made at
submit time comes to the actual wait, on a seeded trace replayed through a real node.

.venv/bin/python bench/eta.py                 # both, as in bench/RESULTS.md
.venv/bin/python bench/eta.py --tasks 200     # a shorter accuracy run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import random
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import describe, load_average
from bench.stats import median, percentile
from slotline.api.queue import open_queue
from slotline.clock import utcnow
from slotline.errors import InvalidTransition
from slotline.scheduler import eta
from slotline.store import Store, estimates, open_store
from slotline.store.estimates import line_estimates, run_times

# Three agent types: (median seconds, log-normal sigma, their per-type limit).
AGENTS = {"quick": (0.08, 0.6, 2), "steady": (0.25, 0.35, 2), "slow": (0.5, 0.5, 1)}
MAX_CONCURRENT = 4


def refresh_cost(queued: int, repeat: int) -> dict[str, Any]:
    """Median seconds of one refresh (read the line, simulate it) with `queued` tasks in
    line behind three running ones, per-agent limits, on SQLite."""
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "eta.db")
        try:
            _limits(store)
            store.set_setting("max_queue_size", queued + 10)
            names = list(AGENTS)
            for start in range(0, queued, 1000):
                store.submit_many(
                    [
                        {"command": ["true"], "agent": names[i % 3], "priority": i % 4}
                        for i in range(start, min(queued, start + 1000))
                    ]
                )
            store.claim("bench", limit=MAX_CONCURRENT)
            full, simulate, status = [], [], []
            for _ in range(repeat):
                began = time.perf_counter()
                with store._transaction(write=False) as tx:
                    found = line_estimates(tx, tx.now())
                full.append(time.perf_counter() - began)
                with store._transaction(write=False) as tx:
                    line, times = estimates.whole_line(tx, tx.now()), run_times(tx)
                began = time.perf_counter()
                eta.simulate(line, times)
                simulate.append(time.perf_counter() - began)
                began = time.perf_counter()
                store.status()
                status.append(time.perf_counter() - began)
            assert sum(1 for e in found.values() if e.start is not None) >= queued
            return {
                "queued": queued,
                "refresh_s": round(median(full), 4),
                "simulate_only_s": round(median(simulate), 4),
                "status_with_etas_s": round(median(status), 4),
            }
        finally:
            store.close()


def _limits(store: Store) -> None:
    store.set_setting("max_concurrent", MAX_CONCURRENT)
    for name, (_median, _sigma, cap) in AGENTS.items():
        store.set_limit("agent", name, cap)


async def accuracy(
    tasks: int, seed: int, log_dir: Path, db: Path, dump: Path | None = None
) -> dict[str, Any]:
    """Replay a seeded trace through a node running `sleep`: bursts of submissions, with
    a few bumps, cancels and priority changes; compare each submit-time eta_start with
    the actual start."""
    rng = random.Random(seed)
    queue = open_queue(db)
    store = queue.store
    _limits(store)
    estimates: dict[str, tuple[float, float]] = {}  # id -> (submitted at, eta_start)
    shown_at: dict[str, dict[str, Any]] = {}  # id -> what else was seen at submit
    steered: set[str] = set()
    lags = []
    # The submitter is another process, as a CLI or an agent would be: its reads (and
    # the estimates they make) do not hold the node's interpreter.
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    submitter = context.Process(target=_submitter, args=(str(db), theirs), daemon=True)
    submitter.start()

    async def call(verb: str, arg: Any) -> Any:
        def exchange() -> Any:
            ours.send((verb, arg))
            return ours.recv()

        return await asyncio.to_thread(exchange)

    async with queue.node(log_dir=log_dir):
        submitted = 0
        loop = asyncio.get_running_loop()
        planned = loop.time()
        while submitted < tasks:
            burst = min(tasks - submitted, rng.randint(20, 60))
            for _ in range(burst):
                name = rng.choice(list(AGENTS))
                med, sigma, _cap = AGENTS[name]
                seconds = rng.lognormvariate(0, sigma) * med
                spec = {"command": ["sleep", f"{seconds:.3f}"], "agent": name}
                if rng.random() < 0.15:
                    spec["priority"] = rng.choice(["high", "low"])
                # Submits keep to the trace's clock, so that a slower or faster estimate
                # does not change the load it is measured under (the lag says if not).
                planned += SPACING
                await asyncio.sleep(max(0.0, planned - loop.time()))
                lags.append(loop.time() - planned)
                task_id, queued_at, eta_start, basis, position = await call("submit", spec)
                # Until a first run has ended there is nothing to estimate from (the
                # basis says "default"): those estimates are the warm-up, not compared.
                basis = basis or "default"
                if eta_start is not None and not basis.startswith("default"):
                    estimates[task_id] = (queued_at or 0.0, eta_start)
                    shown_at[task_id] = {
                        "agent": name,
                        "priority": spec.get("priority", "normal"),
                        "position": position,
                        "order": len(shown_at),
                        "basis": basis,
                    }
            submitted += burst
            steered |= await call("steer", rng.getrandbits(32))
            planned += rng.uniform(1.0, 3.0)
            await asyncio.sleep(max(0.0, planned - loop.time()))
        while await call("busy", None):
            await asyncio.sleep(0.2)
    await call("stop", None)
    submitter.join()
    errors, absolute, signed = [], [], []
    waits = []
    records = []
    by_estimate = []  # relative errors of the tasks *estimated* to wait MIN_WAIT or more
    for task in store.list_tasks():
        if task.id not in estimates or task.id in steered or task.started_at is None:
            continue
        queued_at, guess = estimates[task.id]
        actual = task.started_at - queued_at
        waits.append(actual)
        absolute.append(abs(guess - task.started_at))
        signed.append(guess - task.started_at)
        if guess - queued_at >= MIN_WAIT and actual > 0:
            by_estimate.append(abs(guess - task.started_at) / actual)
        if actual >= MIN_WAIT:
            errors.append(abs(guess - task.started_at) / actual)
            records.append(
                {
                    **shown_at[task.id],
                    "id": task.id,
                    "wait": actual,
                    "guess": guess - queued_at,
                    "rel": (guess - task.started_at) / actual,
                }
            )
    await queue.close()
    if dump is not None:
        dump.write_text(json.dumps(records))
    return {
        "tasks": tasks,
        "seed": seed,
        "compared": len(absolute),
        "compared_relative": len(errors),
        "median_wait_s": round(median(waits), 3),
        "median_abs_error_s": round(median(absolute), 3),
        "p90_abs_error_s": round(percentile(absolute, 90), 3),
        # Negative: the estimate was early (the task started later than said).
        "median_signed_error_s": round(median(signed), 3),
        "median_rel_error": round(median(errors), 3),
        "p90_rel_error": round(percentile(errors, 90), 3),
        # Selecting on the actual wait favours the tasks that started later than usual
        # (a short line selected for having waited): the same error over the tasks
        # selected by their estimate instead, as a check on that.
        "median_rel_error_by_estimate": round(median(by_estimate), 3),
        "compared_by_estimate": len(by_estimate),
        "median_submit_lag_s": round(median(lags), 3),
        "max_submit_lag_s": round(max(lags), 3),
        "breakdown": breakdown(records),
    }


def breakdown(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the error comes from: median absolute and signed relative error per agent
    type, per priority, per position at submit, and per fifth of the run (warm-up)."""

    def summary(group: list[dict[str, Any]]) -> dict[str, Any]:
        rel = [r["rel"] for r in group]
        return {
            "n": len(rel),
            "abs": round(median(abs(x) for x in rel), 3) if rel else None,
            "signed": round(median(rel), 3) if rel else None,
        }

    def by(key: Any) -> dict[str, Any]:
        groups: dict[str, list[dict[str, Any]]] = {}
        for record in records:
            groups.setdefault(str(key(record)), []).append(record)
        return {name: summary(group) for name, group in sorted(groups.items())}

    last = max((r["order"] for r in records), default=0) + 1
    return {
        "agent": by(lambda r: r["agent"]),
        "priority": by(lambda r: r["priority"]),
        "position": by(lambda r: _bucket(r["position"])),
        "fifth": by(lambda r: r["order"] * 5 // last + 1),
    }


def _bucket(position: int | None) -> str:
    if position is None:
        return "started"
    for top in (5, 20, 80, 320):
        if position <= top:
            return f"<={top:03d}"
    return ">320"


# Seconds between two submits of a burst, on the trace's clock.
SPACING = 0.05
# Relative error is over tasks that waited at least this long (a wait of 10 ms, missed
# by 20 ms, would count as 200% and say nothing about the estimate).
MIN_WAIT = 0.5


def _submitter(db: str, conn: Connection) -> None:
    """The submitting side of the replay, in its own process: submit and read back the
    estimate, steer, say whether the line is still busy."""
    store = open_store(db)
    try:
        while True:
            verb, arg = conn.recv()
            if verb == "submit":
                task = store.submit(arg)
                shown = store.get(task.id)
                conn.send(
                    (task.id, shown.queued_at, shown.eta_start, shown.eta_basis, shown.position)
                )
            elif verb == "steer":
                steered: set[str] = set()
                _steer(store, random.Random(arg), steered)
                conn.send(steered)
            elif verb == "busy":
                line = store.status()
                conn.send(bool(line.running or line.queued))
            else:
                conn.send(None)
                return
    finally:
        store.close()


def _steer(store: Store, rng: random.Random, steered: set[str]) -> None:
    """A person at work: one bump, one cancel, two priority changes among the queued."""
    queued = [t.id for t in store.status().queued]
    rng.shuffle(queued)
    moves = [store.bump, store.cancel, lambda i: store.set_priority(i, "urgent")]
    for verb, task_id in zip([*moves, moves[2]], queued, strict=False):
        try:
            verb(task_id)
            steered.add(task_id)
        except InvalidTransition:  # it started meanwhile
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--seed", type=int, nargs="+", default=[7])
    parser.add_argument("--no-refresh", action="store_true", help="skip the refresh cost")
    parser.add_argument("--no-accuracy", action="store_true", help="skip the replay")
    parser.add_argument("--dump", type=Path, help="write per-task errors to DUMP-SEED.json")
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    print(json.dumps({"machine": describe(root), "load": load_average()}))
    if not args.no_refresh:
        print(json.dumps({"refresh": refresh_cost(args.queued, args.repeat)}))
    for seed in [] if args.no_accuracy else args.seed:
        dump = None if args.dump is None else args.dump.with_name(f"{args.dump.name}-{seed}.json")
        with tempfile.TemporaryDirectory() as tmp:
            began = utcnow()
            result = asyncio.run(accuracy(args.tasks, seed, Path(tmp), Path(tmp) / "acc.db", dump))
            result["runtime_s"] = round(utcnow() - began, 1)
            result["load_after"] = load_average()
            print(json.dumps({"accuracy": result}))


if __name__ == "__main__":
    main()
