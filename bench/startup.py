"""Start-up of the CLI on a local store: the wall time of `slotline status` and of one
`slotline submit`, each a fresh process, beside a bare `python -c pass`; and the time from
the spawn of `slotline serve` (with and without its HTTP API) to the start of the task
queued before it, as the store records it.

.venv/bin/python bench/startup.py                 # 11 runs of each, medians and ranges
.venv/bin/python bench/startup.py --runs 21 --imports   # and where the imports go
.venv/bin/python bench/startup.py --no-serve      # the CLI commands only

The three commands run in turn (status, submit, bare), so a change in the machine's load
touches all three alike; a warm-up run of each is not counted. `--imports` runs each
command once more under `python -X importtime` and prints the heaviest top-level imports.

The commands run with bytecode caching on, as an installed slotline has (pip compiles it
at install): a `PYTHONDONTWRITEBYTECODE` in the caller's environment is dropped for them,
else every run would compile slotline's sources again (about 50 ms). `--no-bytecode`
keeps it, to measure that case.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the `bench` package importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import load_average
from bench.stats import median

_IMPORT = re.compile(r"import time:\s+\d+ \|\s+(\d+) \|( *)(\S+)")


def commands(store: Path) -> dict[str, list[str]]:
    python = sys.executable
    cli = [python, "-m", "slotline", "--store", str(store)]
    return {
        "slotline status": [*cli, "status"],
        "slotline submit -- true": [*cli, "submit", "--", "true"],
        "python -c pass": [python, "-c", "pass"],
    }


ENV = dict(os.environ)


def wall(argv: list[str]) -> tuple[float, float]:
    """Milliseconds from the start of `argv` to its exit, and of CPU it used (user and
    system: the steadier figure on a loaded machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=ENV)
    took = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu * 1000


def serve_to_first_start(folder: Path, http: bool) -> float:
    """Milliseconds from the spawn of `slotline serve` on a fresh store holding one queued
    `sleep 0` to that task's start (its `started_at`, written by the node's claim)."""
    from slotline.store import open_store

    path = folder / f"serve-{time.monotonic_ns()}.db"
    store = open_store(path)
    try:
        task = store.submit({"command": ["sleep", "0"]})
        argv = [sys.executable, "-m", "slotline", "--store", str(path), "serve"]
        argv += ["--port", "0"] if http else ["--no-http"]
        spawned = time.time()  # the store's clock is the wall clock: same machine
        node = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=ENV,
            start_new_session=True,
        )
        try:
            while (started := store.get(task.id, estimate=False).started_at) is None:
                if node.poll() is not None:
                    raise RuntimeError(f"slotline serve exited ({node.returncode}) before a start")
                time.sleep(0.01)  # how often it looks, not what it measures
        finally:
            node.send_signal(signal.SIGTERM)
            node.wait(30)
        return (started - spawned) * 1000
    finally:
        store.close()


def heaviest_imports(argv: list[str], shown: int = 8) -> list[tuple[str, float]]:
    """The top-level imports of one run of `argv` by cumulative milliseconds."""
    run = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
    )
    found = []
    for line in run.stderr.splitlines():
        match = _IMPORT.match(line)
        if match and len(match.group(2)) == 1:  # a top-level import
            found.append((match.group(3), int(match.group(1)) / 1000))
    return sorted(found, key=lambda item: -item[1])[:shown]


def main() -> int:
    parser = argparse.ArgumentParser(prog="bench/startup.py")
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--imports", action="store_true", help="also profile the imports")
    parser.add_argument(
        "--no-serve", action="store_true", help="skip serve's spawn-to-first-start runs"
    )
    parser.add_argument(
        "--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE if it is set"
    )
    args = parser.parse_args()
    if not args.no_bytecode:
        ENV.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory(prefix="slotline-startup-") as folder:
        store = Path(folder) / "store.db"
        for argv in commands(store).values():  # also writes the bytecode caches
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=ENV)
        found: dict[str, list[float]] = {name: [] for name in commands(store)}
        cpu: dict[str, list[float]] = {name: [] for name in commands(store)}
        print(f"load average at start: {load_average()}", file=sys.stderr)
        for run in range(args.runs + 1):
            for name, argv in commands(store).items():
                took, used = wall(argv)
                if run:  # the first round warms the caches
                    found[name].append(took)
                    cpu[name].append(used)
        if not args.no_serve:
            serving = {
                "slotline serve, spawn → first start": True,
                "slotline serve --no-http, spawn → first start": False,
            }
            found.update({name: [] for name in serving})
            for run in range(args.runs + 1):
                for name, http in serving.items():
                    took = serve_to_first_start(Path(folder), http)
                    if run:
                        found[name].append(took)
        print(f"load average at end: {load_average()}", file=sys.stderr)
        print("| command | wall ms, median | min–max | CPU ms, median |")
        print("|---|---:|---:|---:|")
        for name, values in found.items():
            shown = name if "→" in name else f"`{name}`"
            used = f"{median(cpu[name]):.0f}" if cpu.get(name) else ""
            spread = f"{min(values):.0f}–{max(values):.0f}"
            print(f"| {shown} | {median(values):.0f} | {spread} | {used} |")
        if args.imports:
            for name, argv in commands(store).items():
                if name.startswith("slotline"):
                    heavy = ", ".join(f"{mod} {ms:.0f}" for mod, ms in heaviest_imports(argv))
                    print(f"\n`{name}`, heaviest top-level imports (ms): {heavy}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
