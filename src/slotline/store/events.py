"""The event log: every change appends one event in the transaction that makes it, and
readers (followers, the dashboard, metrics) read it by sequence number."""

from __future__ import annotations

from typing import Any

from slotline.models import Event, Status, Task
from slotline.store.core import StoreCore
from slotline.store.queries import Tx
from slotline.store.rows import dumps, event_from_row


def emit(tx: Tx, kind: str, task_id: str | None, at: float, **data: Any) -> None:
    """Append an event to the log when the transaction commits (`Tx.append_events`)."""
    tx.append_events([{"at": at, "kind": kind, "task_id": task_id, "data": dumps(data)}])


def change(tx: Tx, task: Task, kind: str, to: Status, now: float, **data: Any) -> None:
    """Emit the event of a status change the caller has written."""
    emit(tx, kind, task.id, now, **{"from": task.status.value, "to": to.value, **data})


def last_seq(tx: Tx) -> int:
    return int((tx.one("events_last_seq") or {"seq": 0})["seq"])


class EventVerbs(StoreCore):
    """Reading the event log."""

    def events(self, since: int = 0, limit: int = 1000) -> list[Event]:
        """Events with `seq` greater than `since`, oldest first."""
        with self._transaction(write=False) as tx:
            return [event_from_row(r) for r in tx.rows("events_since", since=since, limit=limit)]

    def task_events(self, task_id: str, limit: int = 1000) -> list[Event]:
        """The last `limit` events of one task (full id), oldest first."""
        with self._transaction(write=False) as tx:
            rows = tx.rows("events_of_task", task_id=task_id, limit=limit)
            return [event_from_row(r) for r in reversed(rows)]

    def last_seq(self) -> int:
        with self._transaction(write=False) as tx:
            return last_seq(tx)
