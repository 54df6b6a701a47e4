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
