"""Run every benchmark on slotline and on huey, and print a table of medians.

.venv/bin/python bench/run.py               # full run, 5 repeats
.venv/bin/python bench/run.py --quick       # small sizes, 1 repeat
.venv/bin/python bench/run.py --repeat 3 --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import slotline_side
from bench.child import ROOT, SIDES, run_child
from bench.machine import describe, load_average
from bench.stats import median, percentile
from bench.table import render, render_spread, rows
from bench.workloads import FULL, NOOP, QUICK, SLEEP, STAMP, Sizes

CHILD_TIMEOUT = 180.0
MIB = 1024.0  # ru_maxrss is in KiB on Linux


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def drain(
    side: str,
    folder: Path,
    workload: str,
    n: int,
    limit: int,
    sleep: float,
    action: str = "drain",
) -> Any:
    """Pre-fill a fresh queue in this process, then drain it in a child of `side`."""
    path = folder / f"{side}-{workload}-{action}.db"
    if side == "slotline":
        slotline_side.fill(path, workload, n, limit, sleep)
    else:
        from bench import huey_side  # huey: the bench extra, when it runs

        huey_side.fill(path, workload, n, sleep)
    result = run_child(side, action, path, CHILD_TIMEOUT, n=n, workers=limit)
    if result["succeeded"] != n:
        raise RuntimeError(f"{side}: only {result['succeeded']} of {n} {workload} tasks succeeded")
    return result


def one_run(sizes: Sizes, order: tuple[str, ...], folder: Path) -> dict[str, float]:
    """Every workload once on each side, in `order`; returns metric → value."""
    sample: dict[str, float] = {}
    for side in order:
        result = run_child(
            side, "submit", folder / f"{side}-submit.db", CHILD_TIMEOUT, n=sizes.submit
        )
        sample[f"{side}.submit"] = result["rate"]
    result = run_child(
        "slotline", "submit_many", folder / "slotline-batch.db", CHILD_TIMEOUT, n=sizes.submit
    )
    sample["slotline.submit_many"] = result["rate"]
    result = run_child(
        "huey", "submit_normal", folder / "huey-normal.db", CHILD_TIMEOUT, n=sizes.submit
    )
    sample["huey.submit_normal"] = result["rate"]
    sample["slotline.submit_normal"] = sample["slotline.submit"]
    for side in order:
        result = drain(side, folder, NOOP, sizes.drain, sizes.drain_limit, sizes.sleep)
        sample[f"{side}.drain_s"] = result["seconds"]
        sample[f"{side}.drain_rate"] = sizes.drain / result["seconds"]
        sample[f"{side}.drain_rss_mib"] = result["peak_rss_kb"] / MIB
    # The same no-ops as users run them: `slotline serve --app`, each in a worker process.
    result = drain("slotline", folder, NOOP, sizes.drain, sizes.drain_limit, 0, "drain_served")
    sample["slotline.served_drain_s"] = result["seconds"]
    sample["slotline.served_drain_rate"] = sizes.drain / result["seconds"]
    sample["slotline.served_drain_rss_mib"] = result["node_rss_kb"] / MIB
    for side in order:
        result = drain(side, folder, SLEEP, sizes.procs, sizes.procs_limit, sizes.sleep)
        sample[f"{side}.procs_s"] = result["seconds"]
        sample[f"{side}.procs_overhead_s"] = result["seconds"] - sizes.ideal_procs_seconds()
        sample[f"{side}.procs_rss_mib"] = result["peak_rss_kb"] / MIB
    for side in order:
        result = drain(side, folder, STAMP, sizes.handoff, 1, sizes.sleep)
        sample[f"{side}.handoff_p50_ms"] = percentile(result["gaps"], 50) * 1000
        sample[f"{side}.handoff_p99_ms"] = percentile(result["gaps"], 99) * 1000
        if result["store_gaps"]:
            sample[f"{side}.store_p50_ms"] = percentile(result["store_gaps"], 50) * 1000
            sample[f"{side}.store_p99_ms"] = percentile(result["store_gaps"], 99) * 1000
    return sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; 1 repeat by default")
    parser.add_argument(
        "--repeat", type=int, default=None, help="runs per side (default 5, or 1 with --quick)"
    )
    parser.add_argument("--json", type=Path, help="also write every run's raw values here")
    parser.add_argument("--dir", type=Path, help="where the SQLite files go (default: a temp dir)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat or (1 if args.quick else 5)
    machine = describe(ROOT)
    began = time.perf_counter()
    samples = []
    with tempfile.TemporaryDirectory(prefix="slotline-bench-", dir=args.dir) as tmp:
        for index in range(repeat):
            # Alternate who goes first, so drift in the machine's state favours neither side.
            order = SIDES if index % 2 == 0 else SIDES[::-1]
            folder = Path(tmp) / f"run-{index + 1}"
            folder.mkdir()
            log(f"run {index + 1}/{repeat} ({' then '.join(order)})…")
            samples.append(one_run(sizes, order, folder))
    medians = {key: median(s[key] for s in samples) for key in samples[0]}
    elapsed = time.perf_counter() - began
    machine["load average at end"] = load_average()
    mode = "quick" if args.quick else "full"
    print(f"{mode} sizes, median of {repeat} run(s) per side, {elapsed:.0f} s in all\n")
    print("\n".join(f"- {key}: {value}" for key, value in machine.items()) + "\n")
    print(render(rows(sizes), medians))
    if repeat > 1:
        print(f"\nSpread across the {repeat} runs:\n")
        print(render_spread(rows(sizes), samples))
    if args.json:
        payload = {"machine": machine, "sizes": dataclasses.asdict(sizes), "repeat": repeat}
        payload |= {"runs": samples, "medians": medians}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
