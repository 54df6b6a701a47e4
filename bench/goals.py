"""Issue 31's goals table: slotline against every peer, with the floors, met or missed.

.venv/bin/python bench/goals.py                  # 5 rounds, full sizes (~15 minutes)
.venv/bin/python bench/goals.py --quick          # small sizes, 1 round: a smoke run
.venv/bin/python bench/goals.py --repeat 7 --json raw.json --no-postgres

SQLite: slotline, huey's SqliteHuey, PraisonAI's queue. PostgreSQL: slotline, procrastinate,
PgQueuer. Each workload runs once per round on every side, in an order that rotates from
round to round; each ratio is slotline's value over the peer's *in the same round*, and the
table gives the median of those ratios (and of each side's values) with their min-max.
The peers in venvs of their own (PgQueuer, PraisonAI: `bench/peers.py`) are skipped, with
a message saying how to install them, when their venv is missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import floors, pg, run
from bench.child import ROOT, run_child
from bench.machine import describe, load_average
from bench.peers import PGQUEUER, PRAISONAI, run_peer, version
from bench.stats import median, percentile
from bench.workloads import FULL, NOOP, QUICK, SLEEP, STAMP, Sizes

TIMEOUT = 240.0
# (store, label, metric, peer, goal operator, goal value); the ratio is slotline / peer.
GOALS = [
    ("sqlite", "submit, one at a time, tasks/s", "submit", "huey", ">=", 2.0),
    ("sqlite", "submit, one at a time, tasks/s", "submit", "praisonai", ">=", 1.0),
    ("sqlite", "drain no-ops at limit 4, tasks/s", "drain", "huey", ">=", 2.0),
    ("sqlite", "drain no-ops at limit 4, tasks/s", "drain", "praisonai", ">=", 1.0),
    ("sqlite", "sleeps at limit 8, wall / ideal", "procs", "praisonai", "<=", 1.0),
    ("sqlite", "hand-off at limit 1, p50 ms", "p50", "huey", "<=", 0.5),
    ("sqlite", "hand-off at limit 1, p50 ms", "p50", "praisonai", "<=", 1.0),
    ("sqlite", "hand-off at limit 1, p99 ms", "p99", "huey", "<=", 1.0),
    ("sqlite", "hand-off at limit 1, p99 ms", "p99", "praisonai", "<=", 1.0),
    ("pg", "submit, one at a time, tasks/s", "submit", "procrastinate", ">=", 3.0),
    ("pg", "submit, one at a time, tasks/s", "submit", "pgqueuer", ">=", 1.0),
    ("pg", "drain no-ops at limit 4, tasks/s", "drain", "procrastinate", ">=", 3.0),
    ("pg", "drain no-ops at limit 4, tasks/s", "drain", "pgqueuer", ">=", 1.0),
    ("pg", "hand-off at limit 1, p50 ms", "p50", "procrastinate", "<=", 0.5),
]
# The floor beside each metric: (floor key, how to show it).
FLOORS = {
    ("sqlite", "submit"): [
        "floor.sqlite_insert_normal",
        "floor.sqlite_insert_full",
        "floor.sqlite_schema_submit",
    ],
    ("sqlite", "drain"): ["floor.sqlite_claim"],
    ("pg", "submit"): ["floor.pg_insert"],
    ("pg", "drain"): ["floor.pg_claim"],
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _peer_drain(
    python: Path, peer: str, target: str, workload: str, n: int, limit: int, sleep: float
) -> dict[str, Any]:
    run_peer(python, peer, "fill", target, TIMEOUT, n=n, workload=workload, sleep=sleep)
    result = run_peer(python, peer, "drain", target, TIMEOUT, n=n, workers=limit)
    if result["succeeded"] != n:
        raise RuntimeError(f"{peer}: only {result['succeeded']} of {n} {workload} tasks succeeded")
    return result


@dataclasses.dataclass(frozen=True, slots=True)
class Side:
    """One system on one store: how to time a submit loop and a drain of it."""

    store: str  # "sqlite" or "pg"
    name: str
    folder: Path
    sleep: float
    base: str | None = None  # the PostgreSQL server
    python: Path | None = None  # a peer's venv python

    def submit(self, n: int) -> float:
        """Tasks per second, one at a time, into a fresh queue."""
        if self.store == "sqlite":
            path = self.folder / f"{self.name}-submit.db"
            if self.python:
                return float(
                    run_peer(self.python, self.name, "submit", str(path), TIMEOUT, n=n)["rate"]
                )
            return float(run_child(self.name, "submit", path, TIMEOUT, n=n)["rate"])
        assert self.base is not None
        with pg.fresh(self.name, self.base) as url:
            if self.python:
                result = run_peer(self.python, self.name, "submit", url, TIMEOUT, n=n)
            else:
                result = run_child(self.name, "submit", self.folder, TIMEOUT, url=url, n=n)
        return float(result["rate"])

    def drain(self, workload: str, n: int, limit: int) -> dict[str, Any]:
        """Fill a fresh queue with `n` tasks of `workload` (untimed), drain it at `limit`."""
        if self.store == "sqlite":
            if not self.python:
                return run.drain(self.name, self.folder, workload, n, limit, self.sleep)
            target = str(self.folder / f"{self.name}-{workload}-{limit}.db")
            return _peer_drain(self.python, self.name, target, workload, n, limit, self.sleep)
        assert self.base is not None
        if not self.python:
            return pg.drain(self.name, self.base, self.folder, workload, n, limit, self.sleep)
        with pg.fresh(self.name, self.base) as url:
            return _peer_drain(self.python, self.name, url, workload, n, limit, self.sleep)


def workloads(sizes: Sizes) -> list[tuple[str, Callable[[Side], dict[str, float]]]]:
    """Each workload as (name, what one side reports for it)."""

    def submit(side: Side) -> dict[str, float]:
        return {"submit": side.submit(sizes.submit)}

    def drain(side: Side) -> dict[str, float]:
        out = {"drain": sizes.drain / side.drain(NOOP, sizes.drain, sizes.drain_limit)["seconds"]}
        if side.name == "pgqueuer":  # its best case beside: no concurrency limit at all
            out["drain_unlimited"] = sizes.drain / side.drain(NOOP, sizes.drain, 0)["seconds"]
        return out

    def procs(side: Side) -> dict[str, float]:
        seconds = side.drain(SLEEP, sizes.procs, sizes.procs_limit)["seconds"]
        return {"procs": seconds / sizes.ideal_procs_seconds()}

    def handoff(side: Side) -> dict[str, float]:
        gaps = side.drain(STAMP, sizes.handoff, 1)["gaps"]
        return {"p50": percentile(gaps, 50) * 1000, "p99": percentile(gaps, 99) * 1000}

    return [("submit", submit), ("drain", drain), ("procs", procs), ("handoff", handoff)]


def one_round(
    index: int, sizes: Sizes, folder: Path, base: str | None, pythons: dict[str, Path | None]
) -> dict[str, float]:
    """Each workload on every side of each store, the sides in an order rotated by `index`
    (so each side goes first, second and third in turn); then the floors."""
    sample: dict[str, float] = {}
    stores = [("sqlite", ["slotline", "huey", "praisonai"])]
    if base is not None:
        stores.append(("pg", ["slotline", "procrastinate", "pgqueuer"]))
    for store, every in stores:
        sides = [
            Side(store, name, folder, sizes.sleep, base, pythons.get(name))
            for name in every
            if name not in pythons or pythons[name]
        ]
        shift = index % len(sides)
        for workload, measure in workloads(sizes):
            log(f"  {store} {workload} (load {load_average()})")
            for side in sides[shift:] + sides[:shift]:
                for key, value in measure(side).items():
                    sample[f"{store}.{side.name}.{key}"] = value
    sample |= floors.measure(folder, sizes.submit, base)
    return sample


def _stat(values: list[float], digits: int) -> str:
    return f"{median(values):,.{digits}f} ({min(values):,.{digits}f}–{max(values):,.{digits}f})"


def render(samples: list[dict[str, float]]) -> str:
    """The goals table: each goal's sides, floor, same-round ratio and whether it is met."""

    def values(key: str) -> list[float]:
        return [s[key] for s in samples if key in s]

    lines = [
        "| store | workload | slotline | peer | peer's value | floor | slotline/peer, "
        "same round | goal | |",
        "|---|---|---:|---|---:|---:|---:|---|---|",
    ]
    for store, label, metric, peer, op, goal in GOALS:
        ours, theirs = values(f"{store}.slotline.{metric}"), values(f"{store}.{peer}.{metric}")
        if not ours or not theirs:
            lines.append(f"| {store} | {label} | — | {peer} | not run | | | | |")
            continue
        ratios = [
            s[f"{store}.slotline.{metric}"] / s[f"{store}.{peer}.{metric}"]
            for s in samples
            if f"{store}.{peer}.{metric}" in s
        ]
        ratio = median(ratios)
        met = ratio >= goal if op == ">=" else ratio <= goal
        digits = 0 if metric in ("submit", "drain") else 2
        floor = " / ".join(
            f"{median(values(key)):,.0f}" for key in FLOORS.get((store, metric), []) if values(key)
        )
        lines.append(
            f"| {store} | {label} | {_stat(ours, digits)} | {peer} | {_stat(theirs, digits)} | "
            f"{floor} | {_stat(ratios, 2)} | {op} {goal:g}× | {'met' if met else 'missed'} |"
        )
    procs = values("sqlite.slotline.procs")
    if procs:
        met = "met" if median(procs) <= 1.10 else "missed"
        lines.append(
            f"| sqlite | the sleeps at limit 8, wall / ideal (from the node's start in its "
            f"process, not from spawn) | {_stat(procs, 2)} | — | | | | ≤ 1.10 | {met} |"
        )
    return "\n".join(lines)


def render_sides(samples: list[dict[str, float]]) -> str:
    """Every side's median (min-max) of every metric: the rows no goal names too."""
    keys = sorted({k for s in samples for k in s if not k.startswith("floor.")})
    lines = ["| store.side.metric | median (min–max) |", "|---|---:|"]
    for key in keys:
        digits = 0 if key.split(".")[-1] in ("submit", "drain", "drain_unlimited") else 2
        lines.append(f"| {key} | {_stat([s[key] for s in samples if key in s], digits)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/goals.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; 1 round by default")
    parser.add_argument("--repeat", type=int, default=None, help="rounds (default 5)")
    parser.add_argument("--url", default=pg.DEFAULT_URL, help="the PostgreSQL server")
    parser.add_argument("--no-postgres", action="store_true", help="the SQLite sides only")
    parser.add_argument("--pgqueuer-venv", help=f"default ${PGQUEUER.env} or .peers/pgqueuer")
    parser.add_argument("--praisonai-venv", help=f"default ${PRAISONAI.env} or .peers/praisonai")
    parser.add_argument("--json", type=Path, help="also write every round's raw values here")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat or (1 if args.quick else 5)
    base = None if args.no_postgres else args.url
    pythons: dict[str, Path | None] = {}
    for peer, given in ((PGQUEUER, args.pgqueuer_venv), (PRAISONAI, args.praisonai_venv)):
        pythons[peer.name] = peer.python(given)
        if pythons[peer.name] is None:
            log(f"skipping {peer.missing(given)}")
    machine = describe(ROOT)
    began = time.perf_counter()
    samples = []
    with tempfile.TemporaryDirectory(prefix="slotline-goals-") as tmp:
        for index in range(repeat):
            folder = Path(tmp) / f"round-{index + 1}"
            folder.mkdir()
            log(f"round {index + 1}/{repeat}…")
            samples.append(one_round(index, sizes, folder, base, pythons))
    machine["load average at end"] = load_average()
    machine["procrastinate"] = metadata.version("procrastinate")
    for name, python in pythons.items():
        machine[name] = version(python, name) if python else "missing"
    print(f"{'quick' if args.quick else 'full'} sizes, {repeat} round(s), "
          f"{time.perf_counter() - began:.0f} s\n")  # fmt: skip
    print("\n".join(f"- {key}: {value}" for key, value in machine.items()) + "\n")
    print(render(samples) + "\n")
    print(render_sides(samples) + "\n")
    print(floors.render(samples))
    if args.json:
        payload = {"machine": machine, "sizes": dataclasses.asdict(sizes), "runs": samples}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
