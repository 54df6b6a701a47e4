"""Samples of the line for the dashboard's charts: queue depth, running and throughput,
one row per interval, written by the nodes and kept for a day."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slotline.models import Attempt, Task, copy_task
from slotline.store.core import Serial, StoreCore
from slotline.store.rows import attempt_from_row, task_from_row
from slotline.store.settings import read_settings

DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Sample:
    """The line at `at` (the store's clock), and how many tasks ended in the interval
    before it."""

    at: float
    queued: int
    running: int
    max_concurrent: int
    finished: int
    failed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "queued": self.queued,
            "running": self.running,
            "max_concurrent": self.max_concurrent,
            "finished": self.finished,
            "failed": self.failed,
        }


class SampleVerbs(StoreCore):
    """Writing and reading the samples."""

    def record_sample(self, interval: float, now: float | None = None, keep: float = DAY) -> None:
        """Write the sample of the interval `now` falls in, unless a node already did, and
        drop the samples older than `keep` seconds. Wakes no one."""
        with self._transaction(write=True, serial=Serial.ROWS) as tx:
            now = tx.now() if now is None else now
            tx.run(
                "sample_insert",
                bucket=int(now // interval),
                at=now,
                since=now - interval,
                max_concurrent=read_settings(tx).limits.max_concurrent,
            )
            tx.run("samples_prune", before=now - keep)

    def samples(self, since: float) -> list[Sample]:
        """The samples taken at or after `since`, oldest first."""
        with self._transaction(write=False) as tx:
            return [Sample(**row) for row in tx.rows("samples_since", since=since)]

    def finished_since(self, since: float) -> list[Task]:
        """Tasks that ended at or after `since`, with their attempts (for their wait and
        run times), oldest first."""
        with self._transaction(write=False) as tx:
            attempts: dict[str, list[Attempt]] = {}
            for row in tx.rows("attempts_of_finished_since", since=since):
                attempts.setdefault(row["task_id"], []).append(attempt_from_row(row))
            return [
                copy_task(task_from_row(r), attempts=tuple(attempts.get(r["id"], ())))
                for r in tx.rows("tasks_finished_since", since=since)
            ]
