"""A description of the machine and software a benchmark ran on, for the report."""

from __future__ import annotations

import datetime
import os
import platform
import sqlite3
import subprocess
from importlib import metadata
from pathlib import Path


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _commit(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def load_average() -> str:
    """The 1/5/15-minute load averages: other work on the machine skews every timing."""
    return " / ".join(f"{value:.2f}" for value in os.getloadavg())


def describe(root: Path) -> dict[str, str]:
    """CPU, cores, memory, OS, Python, SQLite, slotline commit, huey version, date, load."""
    return {
        "cpu": _cpu_model(),
        "cores": str(os.cpu_count()),
        "memory": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "slotline": f"{_version('slotline')} (commit {_commit(root)})",
        "huey": _version("huey"),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load average at start": load_average(),
    }


def busy_jiffies() -> tuple[int, int]:
    """The machine's busy and total CPU time so far (jiffies, all cores), from /proc/stat;
    (0, 0) where there is none."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def busy_cores(before: tuple[int, int], after: tuple[int, int]) -> float:
    """How many cores were busy on average between two `busy_jiffies` readings."""
    busy, total = after[0] - before[0], after[1] - before[1]
    return 0.0 if total <= 0 else busy / total * (os.cpu_count() or 1)
