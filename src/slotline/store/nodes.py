"""Node bookkeeping: registration, heartbeats, kill requests, usage and pressure reports."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from slotline.models import Attempt, utcnow
from slotline.store import ops
from slotline.store.core import StoreCore
from slotline.store.rows import attempt_from_row
from slotline.store.runs import LEASE_SECONDS


@dataclass(frozen=True, slots=True)
class KillRequest:
    """A running attempt on this node that someone asked to stop."""

    task_id: str
    attempt_id: str
    pid: int | None
    kind: str


class NodeVerbs(StoreCore):
    """What a node reports about itself and asks of the store."""

    # -- node bookkeeping ---------------------------------------------------------------

    def kill_requests(self, node_id: str) -> list[KillRequest]:
        """Running attempts of `node_id` someone asked to stop (cancel, terminate, restart)."""
        with self._transaction(write=False) as tx:
            return [
                KillRequest(r["task_id"], r["attempt_id"], r["pid"], r["kill_request"])
                for r in tx.rows("tasks_kill_requested", node_id=node_id)
            ]

    def heartbeat(
        self, node_id: str, now: float | None = None, lease: float = LEASE_SECONDS
    ) -> None:
        """Renew the node's liveness and the leases of its running attempts."""
        now = utcnow() if now is None else now
        with self._transaction(write=True) as tx:
            if tx.run("node_heartbeat", id=node_id, now=now) == 0:
                tx.run(
                    "node_insert", id=node_id, host=socket.gethostname(), pid=os.getpid(), now=now
                )
            tx.run("attempt_renew", node_id=node_id, lease_expires_at=now + lease)

    def record_usage(self, usage: dict[str, tuple[float, int]]) -> None:
        """Latest CPU% and RSS of running attempts' process trees ({attempt id: (cpu, rss)});
        the peaks are kept. Wakes no one: readers refresh on their own."""
        with self._transaction(write=True) as tx:
            for attempt_id, (cpu, rss) in usage.items():
                tx.run("attempt_usage", id=attempt_id, cpu_percent=float(cpu), rss_bytes=int(rss))

    def note_reconciled(self, task_id: str, attempt_id: str, action: str, **detail: Any) -> None:
        """Log what a starting node did with an attempt it found running: `adopted` (the
        process lives on), `collected` (its exit file told the outcome), `interrupted`."""
        with self._write() as tx:
            ops.emit(
                tx, "reconciled", task_id, utcnow(), attempt=attempt_id, action=action, **detail
            )

    def set_pressure(self, node_id: str, reason: str | None, hold: bool) -> None:
        """Record (or clear) the resource guard's verdict so `status` can say why nothing
        starts; emits an `admission` event only when it changes."""
        now = utcnow()
        with self._write() as tx:
            current = ops.read_settings(tx)["pressure"] or {}
            if current.get("reason") == reason and current.get("hold", False) == hold:
                tx.notify = False
                return
            value = (
                None
                if reason is None
                else {"node": node_id, "reason": reason, "hold": hold, "since": now}
            )
            ops.write_setting(tx, "pressure", value)
            ops.emit(tx, "admission", None, now, node=node_id, reason=reason, hold=hold)

    def node(self, node_id: str) -> dict[str, Any] | None:
        """The node's row (host, pid, started_at, heartbeat_at), if it is registered."""
        with self._transaction(write=False) as tx:
            return tx.one("node_get", id=node_id)

    def register_node(self, node_id: str, now: float | None = None) -> None:
        now = utcnow() if now is None else now
        with self._write() as tx:
            tx.run("node_delete", id=node_id)
            tx.run("node_insert", id=node_id, host=socket.gethostname(), pid=os.getpid(), now=now)
            ops.emit(tx, "node_started", None, now, node=node_id)

    def unregister_node(self, node_id: str) -> None:
        with self._write() as tx:
            tx.run("node_delete", id=node_id)
            ops.emit(tx, "node_stopped", None, utcnow(), node=node_id)

    def live_attempts(self, node_id: str | None = None) -> list[Attempt]:
        """Unfinished attempts (of one node, or of all whose lease lapsed if node_id is None)."""
        with self._transaction(write=False) as tx:
            if node_id is None:
                rows = tx.rows("attempts_lease_lapsed", now=utcnow())
            else:
                rows = tx.rows("attempts_live_of_node", node_id=node_id)
            return [attempt_from_row(r) for r in rows]
