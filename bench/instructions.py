"""Instructions per task of the store alone (`bench/claims.py`), counted by callgrind.

.venv/bin/python bench/instructions.py --before DIR [--limits 1,4] [--url PG_URL]

On a shared, noisy two-core machine the CPU time of a loop of claims drifts by 20% from
run to run; the instructions it executes do not (callgrind counts them, whatever else
the machine is doing). For each tree (`--before DIR` and this one) and each limit, this
runs `bench/claims.py` under `valgrind --tool=callgrind` for 100 and for 400 tasks and
reports the difference over 300: the instructions one more task costs (its share of the
fill's one `submit_many` included), start-up and imports cancelled out. Each count is
the median of `--runs` runs: the store's background checkpoints and its run-time
windows, written once a second, make a count depend a little on the run's wall time
(seen: 0.2% between two runs, and once a count far off). With `--url`,
the loop runs on PostgreSQL (a fresh schema each run) and counts the client's
instructions only. About 90 s a run under callgrind.
"""

from __future__ import annotations

import argparse
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import median

HERE = Path(__file__).resolve().parent.parent
SIZES = (100, 400)
_COLLECTED = re.compile(r"Collected : (\d+)")


def collected(root: Path, where: str, limit: int, n: int) -> int:
    """Instructions callgrind counted for `bench/claims.py` on `root`'s code."""
    done = subprocess.run(
        [
            "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
            sys.executable, str(HERE / "bench" / "claims.py"), where, str(limit), str(n),
        ],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root / "src")},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no count:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_task(root: Path, limit: int, url: str | None, runs: int) -> float:
    small, large = (median([_count(root, limit, url, n) for _ in range(runs)]) for n in SIZES)
    return (large - small) / (SIZES[1] - SIZES[0])


def _count(root: Path, limit: int, url: str | None, n: int) -> int:
    if url is None:
        with tempfile.TemporaryDirectory() as folder:
            return collected(root, str(Path(folder) / "s.db"), limit, n)
    schema = f"ir_{secrets.token_hex(4)}"
    try:
        return collected(root, f"{url}?schema={schema}", limit, n)
    finally:
        _drop(url, schema)


def _drop(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/instructions.py", description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="the other tree's root")
    parser.add_argument("--limits", default="1,4")
    parser.add_argument("--url", help="PostgreSQL server URL (no schema): claim there")
    parser.add_argument("--runs", type=int, default=3, help="runs per count (median)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    store = "PostgreSQL (client)" if args.url else "SQLite"
    print("| store | limit | before, instructions per task | after | after/before |")
    print("|---|---:|---:|---:|---:|")
    for limit in (int(text) for text in args.limits.split(",")):
        before = per_task(args.before.resolve(), limit, args.url, args.runs)
        after = per_task(HERE, limit, args.url, args.runs)
        cells = [store, str(limit), f"{before / 1e6:.2f}M", f"{after / 1e6:.2f}M"]
        print(f"| {' | '.join(cells)} | {after / before:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
