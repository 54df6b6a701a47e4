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
    ("sqlite", "submit"): ["floor.sqlite_insert_normal", "floor.sqlite_insert_full"],
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


def sqlite_side(side: str, sizes: Sizes, folder: Path, python: Path | None) -> dict[str, float]:
    """Every SQLite workload once on `side` (slotline, huey or praisonai)."""
    out: dict[str, float] = {}

    def drain(workload: str, n: int, limit: int) -> dict[str, Any]:
        if side != "praisonai":
            return run.drain(side, folder, workload, n, limit, sizes.sleep)
        assert python is not None
        target = str(folder / f"praisonai-{workload}.db")
        return _peer_drain(python, side, target, workload, n, limit, sizes.sleep)

    path = folder / f"{side}-submit.db"
    if side == "praisonai":
        assert python is not None
        out["submit"] = run_peer(python, side, "submit", str(path), TIMEOUT, n=sizes.submit)["rate"]
    else:
        out["submit"] = run_child(side, "submit", path, TIMEOUT, n=sizes.submit)["rate"]
    out["drain"] = sizes.drain / drain(NOOP, sizes.drain, sizes.drain_limit)["seconds"]
    seconds = drain(SLEEP, sizes.procs, sizes.procs_limit)["seconds"]
    out["procs"] = seconds / sizes.ideal_procs_seconds()
    gaps = drain(STAMP, sizes.handoff, 1)["gaps"]
    out["p50"], out["p99"] = percentile(gaps, 50) * 1000, percentile(gaps, 99) * 1000
    return out


def pg_side(
    side: str, sizes: Sizes, folder: Path, base: str, python: Path | None
) -> dict[str, float]:
    """Every PostgreSQL workload once on `side` (slotline, procrastinate or pgqueuer)."""
    out: dict[str, float] = {}

    def drain(workload: str, n: int, limit: int) -> dict[str, Any]:
        if side != "pgqueuer":
            return pg.drain(side, base, folder, workload, n, limit, sizes.sleep)
        assert python is not None
        with pg.fresh(side, base) as url:
            return _peer_drain(python, side, url, workload, n, limit, sizes.sleep)

    with pg.fresh(side, base) as url:
        if side == "pgqueuer":
            assert python is not None
            result = run_peer(python, side, "submit", url, TIMEOUT, n=sizes.submit)
        else:
            result = run_child(side, "submit", folder, TIMEOUT, url=url, n=sizes.submit)
    out["submit"] = result["rate"]
    out["drain"] = sizes.drain / drain(NOOP, sizes.drain, sizes.drain_limit)["seconds"]
    if side == "pgqueuer":  # its best case beside: no concurrency limit on the entrypoint
        out["drain_unlimited"] = sizes.drain / drain(NOOP, sizes.drain, 0)["seconds"]
    seconds = drain(SLEEP, sizes.procs, sizes.procs_limit)["seconds"]
    out["procs"] = seconds / sizes.ideal_procs_seconds()
    gaps = drain(STAMP, sizes.handoff, 1)["gaps"]
    out["p50"], out["p99"] = percentile(gaps, 50) * 1000, percentile(gaps, 99) * 1000
    return out


def one_round(
    index: int, sizes: Sizes, folder: Path, base: str | None, pythons: dict[str, Path | None]
) -> dict[str, float]:
    """Every side of both stores once (sides in an order rotated by `index`), the floors."""
    sample: dict[str, float] = {}
    stores: list[tuple[str, list[str], Callable[[str], dict[str, float]]]] = [
        ("sqlite", ["slotline", "huey", "praisonai"],
         lambda side: sqlite_side(side, sizes, folder, pythons.get(side))),
    ]  # fmt: skip
    if base is not None:
        stores.append(
            ("pg", ["slotline", "procrastinate", "pgqueuer"],
             lambda side: pg_side(side, sizes, folder, base, pythons.get(side))),
        )  # fmt: skip
    for store, every, measure in stores:
        sides = [s for s in every if s in ("slotline", "huey", "procrastinate") or pythons.get(s)]
        shift = index % len(sides)
        for side in sides[shift:] + sides[:shift]:
            log(f"  {store}: {side} (load {load_average()})")
            for key, value in measure(side).items():
                sample[f"{store}.{side}.{key}"] = value
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
            f"| sqlite | 200 sleeps at limit 8, wall / ideal (from the node's start in its "
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
