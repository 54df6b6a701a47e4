"""One measurement in a fresh interpreter: `python -m bench.child SIDE ACTION ...` prints JSON.

Each side's module is imported only in its own child, so the peak RSS a child reports is
that side's: this process alone, not the commands it starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("slotline", "huey")
# The PostgreSQL run (bench/pg.py): slotline on PostgreSQL against procrastinate.
PG_SIDES = ("slotline", "procrastinate")


def run_child(side: str, action: str, path: Path, timeout: float, **params: Any) -> dict[str, Any]:
    """Run `action` of `side` in a child process and return what it reported.

    The page cache is flushed first, so that no measurement pays (in its own fsyncs) for
    the writeback of an earlier one's, or of an untimed pre-fill's, unsynced writes.

    Raises:
        RuntimeError: the child failed or timed out (its stderr tail is in the message).
    """
    os.sync()
    argv = [sys.executable, "-m", "bench.child", side, action, str(path), f"--timeout={timeout}"]
    argv += [f"--{name}={value}" for name, value in params.items()]
    try:
        proc = subprocess.run(
            argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout + 30, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{side} {action} did not finish in {timeout + 30:g}s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"{side} {action} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def peak_rss_kb() -> int:
    """The high-water RSS of this process image, in KiB.

    Not getrusage's ru_maxrss: Linux carries the forking parent's high-water mark across
    exec into it (and into the RUSAGE_CHILDREN the parent reads), so every child would
    report at least the size of the runner. VmHWM belongs to the exec'd image alone.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.child")
    parser.add_argument("side", choices=sorted({*SIDES, *PG_SIDES}))
    parser.add_argument(
        "action", choices=("submit", "submit_normal", "submit_many", "drain", "drain_served")
    )
    parser.add_argument("path", type=Path, help="the SQLite file (fresh, or pre-filled to drain)")
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="huey's worker threads")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--url", help="a PostgreSQL store instead of the SQLite file; `path` is then a folder"
    )
    parser.add_argument("--slots", type=int, default=None, help="slotline: this node's slots")
    args = parser.parse_args(argv)
    side = importlib.import_module(f"bench.{args.side}_side")
    result: dict[str, Any]
    if args.url:  # bench/pg.py
        result = _on_postgres(side, args)
    elif args.action == "submit":
        result = {"rate": side.submit_rate(args.path, args.n)}
    elif args.action == "submit_normal":  # huey only
        result = {"rate": side.submit_rate(args.path, args.n, normal=True)}
    elif args.action == "submit_many":
        result = {"rate": side.submit_many_rate(args.path, args.n)}
    elif args.action == "drain_served":  # slotline only: through `slotline serve --app`
        result = dataclasses.asdict(side.drain_served(args.path, args.timeout))
    elif args.side == "huey":
        result = dataclasses.asdict(side.drain(args.path, args.n, args.workers, args.timeout))
    else:
        result = dataclasses.asdict(side.drain(args.path, args.timeout))
    result["peak_rss_kb"] = peak_rss_kb()
    print(json.dumps(result))
    return 0


def _on_postgres(side: Any, args: argparse.Namespace) -> dict[str, Any]:
    if args.action == "submit":
        return {"rate": side.submit_rate(args.url, args.n)}
    if args.action != "drain":
        raise SystemExit(f"{args.action} is not measured on PostgreSQL")
    if args.side == "procrastinate":
        return dataclasses.asdict(side.drain(args.url, args.n, args.workers, args.timeout))
    drained = side.drain(args.url, args.timeout, log_dir=args.path / "logs", slots=args.slots)
    return dataclasses.asdict(drained)


if __name__ == "__main__":
    sys.exit(main())
