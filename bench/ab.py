"""Before and after on the slotline side alone: the drains of `run.py`, by two source trees
in turn, with the node's CPU per task.

.venv/bin/python bench/ab.py --before /tmp/base               # 5 rounds of every drain
.venv/bin/python bench/ab.py --before /tmp/base --rounds 7 --only noop,sleep
.venv/bin/python bench/ab.py --before /tmp/base --url postgresql://postgres@127.0.0.1:5432/test
.venv/bin/python bench/ab.py --before /tmp/base --only claims-1,claims-4 --url URL  # store alone

`--before` is the root of another checkout (`git worktree add`, or `git archive REV | tar
-x -C DIR`): its `src` and `bench` run the "before" side, this tree's the "after" side,
both with this interpreter. Each drain runs in a fresh child (`bench.child`) on a queue
filled by its own tree (a SQLite file, or with `--url` a fresh schema on that PostgreSQL
server, dropped afterwards); the sides alternate, and which goes first alternates by round.
CPU is the child's user + system time (`RUSAGE_CHILDREN` around it): the node process
alone, not the commands it starts (keepers are not its children).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import load_average
from bench.stats import median, percentile
from bench.workloads import FULL, NOOP, SLEEP, STAMP

HERE = Path(__file__).resolve().parent.parent
DRAINS = {
    NOOP: (FULL.drain, FULL.drain_limit),
    SLEEP: (FULL.procs, FULL.procs_limit),
    STAMP: (FULL.handoff, 1),
}
# The store alone (`bench/claims.py`): claims in a loop at limit 1 and 4, 1,000 tasks.
CLAIM_LOOPS = {"claims-1": 1, "claims-4": 4}
CLAIM_TASKS = 1000


def drain(root: Path, workload: str, folder: Path, base: str | None) -> dict[str, float]:
    """Fill a queue with `root`'s code, drain it in a child of `root`; wall, CPU, gaps."""
    if base is None:
        return _drain(root, workload, folder / f"{root.name}-{workload}.db", None)
    from bench.pg import fresh

    with fresh("slotline", base) as url:
        return _drain(root, workload, folder, url)


def _drain(root: Path, workload: str, path: Path, url: str | None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"}
    where = str(path) if url is None else url
    if workload in CLAIM_LOOPS:  # this tree's script on `root`'s code
        argv = [str(HERE / "bench" / "claims.py"), where, str(CLAIM_LOOPS[workload])]
        done = subprocess.run(
            [sys.executable, *argv, str(CLAIM_TASKS)],
            env=env, cwd=root, capture_output=True, text=True, check=True,
        )  # fmt: skip
        found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return found
    n, limit = DRAINS[workload]
    fill = f"from bench import slotline_side as s; s.fill({where!r}, {workload!r}, {n}, {limit})"
    subprocess.run([sys.executable, "-c", fill], env=env, cwd=root, check=True)
    os.sync()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    extra = [] if url is None else [f"--url={url}"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.child", "slotline", "drain", str(path), *extra],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["succeeded"] != n:
        raise RuntimeError(f"{root}: {result['succeeded']} of {n} {workload} tasks succeeded")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    found = {"wall s": result["seconds"], "CPU ms per task": cpu / n * 1000}
    if result["gaps"]:
        found["hand-off p50 ms"] = percentile(result["gaps"], 50) * 1000
        found["hand-off p99 ms"] = percentile(result["gaps"], 99) * 1000
    return found


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/ab.py", description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other tree's root")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--only",
        default=",".join(DRAINS),
        help=f"workloads, comma-separated (of {', '.join([*DRAINS, *CLAIM_LOOPS])})",
    )
    parser.add_argument("--url", help="drain on this PostgreSQL server instead of SQLite files")
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": HERE}
    workloads = args.only.split(",")
    samples: dict[tuple[str, str, str], list[float]] = {}
    print(f"load average at start: {load_average()}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="slotline-ab-") as tmp:
        for index in range(args.rounds):
            order = ["before", "after"] if index % 2 == 0 else ["after", "before"]
            folder = Path(tmp) / f"round-{index + 1}"
            folder.mkdir()
            for workload in workloads:
                for side in order:
                    found = drain(sides[side], workload, folder, args.url)
                    for metric, value in found.items():
                        samples.setdefault((workload, metric, side), []).append(value)
            print(f"round {index + 1}/{args.rounds}, load {load_average()}", file=sys.stderr)
    print(
        "| workload | metric | before, median (min–max) | after, median (min–max) | after/before |"
    )
    print("|---|---|---:|---:|---:|")
    for workload in workloads:
        metrics = [m for (w, m, s) in samples if w == workload and s == "after"]
        for metric in metrics:
            old, new = samples[(workload, metric, "before")], samples[(workload, metric, "after")]
            cells = [f"{median(v):.3f} ({min(v):.3f}–{max(v):.3f})" for v in (old, new)]
            ratio = median(new) / median(old)
            print(f"| {workload} | {metric} | {cells[0]} | {cells[1]} | {ratio:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
