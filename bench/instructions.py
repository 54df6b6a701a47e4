"""Instructions per task of the store alone (`bench/claims.py`), counted by callgrind.

.venv/bin/python bench/instructions.py --before DIR [--limits 1,4] [--url PG_URL]

On a shared, noisy two-core machine the CPU time of a loop of claims drifts by 20% from
run to run; the instructions it executes do not (callgrind counts them, whatever else
the machine is doing). For each tree (`--before DIR` and this one) and each limit, this
runs `bench/claims.py` under `valgrind --tool=callgrind` for 100 and for 400 tasks and
reports the difference over 300: the instructions one more task costs (its share of the
fill's one `submit_many` included), start-up and imports cancelled out. With `--url`,
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

HERE = Path(__file__).resolve().parent.parent
SMALL, LARGE = 100, 400
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


def per_task(root: Path, limit: int, url: str | None) -> float:
    counts = []
    for n in (SMALL, LARGE):
        if url is None:
            with tempfile.TemporaryDirectory() as folder:
                counts.append(collected(root, str(Path(folder) / "s.db"), limit, n))
        else:
            schema = f"ir_{secrets.token_hex(4)}"
            try:
                counts.append(collected(root, f"{url}?schema={schema}", limit, n))
            finally:
                _drop(url, schema)
    return (counts[1] - counts[0]) / (LARGE - SMALL)


def _drop(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/instructions.py", description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="the other tree's root")
    parser.add_argument("--limits", default="1,4")
    parser.add_argument("--url", help="PostgreSQL server URL (no schema): claim there")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (Debian: apt-get install valgrind)")
    store = "PostgreSQL (client)" if args.url else "SQLite"
    print("| store | limit | before, instructions per task | after | after/before |")
    print("|---|---:|---:|---:|---:|")
    for limit in (int(text) for text in args.limits.split(",")):
        before = per_task(args.before.resolve(), limit, args.url)
        after = per_task(HERE, limit, args.url)
        cells = [store, str(limit), f"{before / 1e6:.2f}M", f"{after / 1e6:.2f}M"]
        print(f"| {' | '.join(cells)} | {after / before:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
