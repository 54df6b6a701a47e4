"""CPU and memory of a run's whole process tree (the attempt's pid and its descendants)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

# psutil create times can differ by rounding; the runner uses the same tolerance.
SAME_START_TOLERANCE = 1.0
FORGET_AFTER = 60.0
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


@dataclass(frozen=True, slots=True)
class Usage:
    """The tree's CPU use (100 = one core busy) and resident memory, summed."""

    cpu_percent: float
    rss: int
    processes: int


class TreeSampler:
    """Samples process trees; CPU% is over the time since the previous sample of the same
    process (for a process seen for the first time, over its lifetime so far)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._clock = clock
        self._wall = wall
        # (pid, create time) -> (CPU seconds, clock) at the last sample
        self._seen: dict[tuple[int, float], tuple[float, float]] = {}

    def sample(self, pid: int | None, pid_started: float | None = None) -> Usage | None:
        """Usage of `pid` and all its descendants, or None if it is gone (or is another
        process that reused the pid: its start time differs from `pid_started`)."""
        if pid is None:
            return None
        try:
            root = psutil.Process(pid)
            if pid_started is not None and (
                abs(root.create_time() - pid_started) >= SAME_START_TOLERANCE
            ):
                return None
            tree = [root, *root.children(recursive=True)]
        except _GONE:
            return None
        now = self._clock()
        cpu = 0.0
        rss = count = 0
        for process in tree:
            try:
                with process.oneshot():
                    times = process.cpu_times()
                    memory = process.memory_info()
                    created = process.create_time()
            except _GONE:
                continue
            # Children that have exited and were reaped add to children_user/system.
            used = times.user + times.system + times.children_user + times.children_system
            key = (process.pid, created)
            before = self._seen.get(key)
            if before is None:
                rate = used / max(self._wall() - created, 1e-3)
            else:
                rate = (used - before[0]) / max(now - before[1], 1e-3)
            self._seen[key] = (used, now)
            cpu += max(rate, 0.0) * 100.0
            rss += memory.rss
            count += 1
        self._forget(now)
        return Usage(cpu, rss, count) if count else None

    def _forget(self, now: float) -> None:
        stale = [key for key, (_, at) in self._seen.items() if now - at > FORGET_AFTER]
        for key in stale:
            del self._seen[key]


def size(nbytes: int) -> str:
    """`812K`, `12.3M`, `1.4G`."""
    value = float(nbytes)
    for unit in ("B", "K"):
        if value < 1024:
            return f"{value:.0f}{unit}"
        value /= 1024
    return f"{value:.1f}M" if value < 1024 else f"{value / 1024:.1f}G"


def tree_cpu_seconds(pid: int, pid_started: float | None = None) -> float | None:
    """The CPU time (user and system, seconds) `pid` and its descendants have used, or
    None if it is gone (or is another process that reused the pid)."""
    try:
        root = psutil.Process(pid)
        if (
            pid_started is not None
            and abs(root.create_time() - pid_started) >= SAME_START_TOLERANCE
        ):
            return None
        tree = [root, *root.children(recursive=True)]
    except _GONE:
        return None
    used = 0.0
    for process in tree:
        try:
            times = process.cpu_times()
        except _GONE:
            continue
        used += times.user + times.system + times.children_user + times.children_system
    return used
