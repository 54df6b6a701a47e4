"""Watching real processes for a task that runs twice at once (shared by fault tests).

Two independent witnesses: the agents' own ledger (`solo_agent.py`: an exclusive lock per
task, so a second live process of a task writes `DOUBLE`), and a sampler that lists the
live agent processes every ~50 ms and keeps the most seen at once, per task and in all.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psutil

AGENT = Path(__file__).with_name("solo_agent.py")
EVERY = 0.05


@dataclass(frozen=True)
class Entry:
    """One line of the ledger."""

    word: str  # start, DOUBLE or done
    key: str
    pid: int
    at: float
    attempt_id: str


@dataclass
class Seen:
    """A process of one task as the sampler saw it: first and last time alive."""

    key: str
    first: float
    last: float


class Witness:
    """The ledger and the sampler of one test's agents (all in `folder`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.seen: dict[int, Seen] = {}
        self.peak_per_task: Counter[str] = Counter()
        self.peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="double-run-sampler")

    def command(self, key: str, seconds: float) -> list[str]:
        """The argv of a task `key` whose agent works `seconds`."""
        return [sys.executable, str(AGENT), key, str(self.folder), str(seconds)]

    def entries(self, word: str | None = None) -> list[Entry]:
        try:
            text = (self.folder / "ledger").read_text()
        except FileNotFoundError:
            return []
        entries = []
        for line in text.splitlines():
            w, key, pid, at, attempt_id = line.split()
            entries.append(Entry(w, key, int(pid), float(at), attempt_id))
        return [e for e in entries if word is None or e.word == word]

    def alive(self, pids: list[int]) -> list[int]:
        """Those of `pids` still running (a zombie holds nothing: it is not)."""
        running = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    running.append(pid)
            except psutil.NoSuchProcess:
                pass
        return running

    def start(self) -> Witness:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _sample(self) -> None:
        while not self._stop.wait(EVERY):
            now = time.time()
            per_task: Counter[str] = Counter()
            for proc in psutil.process_iter(["cmdline", "status"]):
                argv = proc.info["cmdline"] or []
                if (
                    len(argv) == 5
                    and argv[1] == str(AGENT)
                    and argv[3] == str(self.folder)
                    and proc.info["status"] != psutil.STATUS_ZOMBIE
                ):
                    per_task[argv[2]] += 1
                    seen = self.seen.setdefault(proc.pid, Seen(argv[2], now, now))
                    seen.last = now
            self.peak_total = max(self.peak_total, sum(per_task.values()))
            for key, count in per_task.items():
                self.peak_per_task[key] = max(self.peak_per_task[key], count)
