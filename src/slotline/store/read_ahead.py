"""The read-ahead of a claim's reports: what recording each start and ending each run
reads, read for them all at once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from slotline.bounds import parse_id
from slotline.errors import InvalidInput
from slotline.store.queries import Tx
from slotline.store.statements import Ids, Read

if TYPE_CHECKING:
    from slotline.store.runs import Report, StartReport


# The queries read ahead, each by the reports' attempt ids.
_BY_ATTEMPTS = ("attempts_of_ids", "tasks_of_attempts", "dependents_of_attempts")
# The reads they stand in for.
_PRELOADED = ("attempt_get", "task_get", "dependents_of")


@contextlib.contextmanager
def read_ahead(tx: Tx, reports: Sequence[Report | StartReport]) -> Iterator[None]:
    """Within it: read the attempts, tasks and dependents that `record` and `end` read
    for each of `reports` in three reads for them all, sent together (one round trip on
    PostgreSQL), not three for each. Each report's part changes only its own task and
    attempt and its dependents, which are not running and so have no report of their
    own; a row is given to the first read of it only (a run that started and ended
    within one turn has two reports: the end reads again what the start changed). So
    what is read ahead is still what each part would have read. What no part took is
    dropped at the end.

    Those three reads (`reads`) may have been sent ahead, with the transaction's first
    round trip: they are then answered from there. On a store without a server, which
    has no round trip to save, each part reads its own rows (the read ahead, its
    preloading and its lookups cost more there than the reads they stand in for)."""
    if not tx.reads_ahead:
        yield
        return
    ids = _ids(reports)
    if ids:
        _read(tx, ids)
    try:
        yield
    finally:
        tx.forget_preloaded(_PRELOADED)


def reads(reports: Sequence[Report | StartReport]) -> list[Read]:
    """The reads `read_ahead` makes for `reports`: their attempts, those attempts' tasks
    and those tasks' dependents, by the attempts' ids (none without a report)."""
    ids = _ids(reports)
    return _reads(ids) if ids else []


def _ids(reports: Sequence[Report | StartReport]) -> list[str]:
    return sorted({i for i in (_known_id(r.attempt_id) for r in reports) if i is not None})


def _reads(ids: list[str]) -> list[Read]:
    by_ids = Ids(ids)
    return [Read(query, {"ids": by_ids}, by_index=True) for query in _BY_ATTEMPTS]


def _read(tx: Tx, ids: list[str]) -> None:
    attempts, tasks, found = tx.read_together(_reads(ids))
    by_id = {row["id"]: row for row in attempts}
    for attempt_id in ids:
        row = by_id.get(attempt_id)
        tx.preload("attempt_get", {"id": attempt_id}, [] if row is None else [row])
    for row in tasks:
        tx.preload("task_get", {"id": row["id"]}, [row])
    for task_id in {row["task_id"] for row in attempts}:
        rows = [{"task_id": r["task_id"]} for r in found if r["dep_id"] == task_id]
        tx.preload("dependents_of", {"dep_id": task_id}, rows)


def _known_id(text: str) -> str | None:
    try:
        return parse_id(text)
    except InvalidInput:
        return None
