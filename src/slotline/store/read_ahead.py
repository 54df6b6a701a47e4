"""The read-ahead of a claim's reports: what ending each run reads, read for them all at once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from slotline.bounds import parse_id
from slotline.errors import InvalidInput
from slotline.store.queries import Tx, Where

if TYPE_CHECKING:
    from slotline.store.runs import Report


@contextlib.contextmanager
def read_ahead(tx: Tx, reports: Sequence[Report]) -> Iterator[None]:
    """Within it: read the attempts, tasks and dependents that `end` reads for each of `reports`
    in three reads for them all, not three for each (a round trip apiece on
    PostgreSQL). Each report's part changes only its own task and attempt and its
    dependents, which are not running and so have no report of their own: what is read
    ahead is still what each part would have read. What no part took is dropped at
    the end."""
    ids = sorted({i for i in (_known_id(r.attempt_id) for r in reports) if i is not None})
    if len(ids) >= 2:
        _read(tx, ids)
    try:
        yield
    finally:
        tx.forget_preloaded()


def _read(tx: Tx, ids: list[str]) -> None:
    attempts = tx.select(
        "attempts_page", Where().any("attempts_where_id", ({"id": i} for i in ids))
    )
    task_ids = sorted({row["task_id"] for row in attempts})
    tasks = tx.select(
        "tasks_selected", Where().any("tasks_where_id", ({"id": t} for t in task_ids))
    )
    found = tx.select(
        "dependents_selected", Where().any("deps_where_dep", ({"dep_id": t} for t in task_ids))
    )
    by_id = {row["id"]: row for row in attempts}
    for attempt_id in ids:
        row = by_id.get(attempt_id)
        tx.preload("attempt_get", {"id": attempt_id}, [] if row is None else [row])
    for row in tasks:
        tx.preload("task_get", {"id": row["id"]}, [row])
    for task_id in task_ids:
        rows = [{"task_id": r["task_id"]} for r in found if r["dep_id"] == task_id]
        tx.preload("dependents_of", {"dep_id": task_id}, rows)


def _known_id(text: str) -> str | None:
    try:
        return parse_id(text)
    except InvalidInput:
        return None
