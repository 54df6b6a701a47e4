"""Node bookkeeping: registration, heartbeats, kill requests, usage and pressure reports."""

from __future__ import annotations

import os
import socket
from typing import Any

from slotline.models import Attempt
from slotline.store.core import Serial, StoreCore
from slotline.store.events import emit
from slotline.store.rows import attempt_from_row
from slotline.store.settings import LEASE_SECONDS


class NodeVerbs(StoreCore):
    """What a node reports about itself and asks of the store."""

    # -- node bookkeeping ---------------------------------------------------------------

    def heartbeat(
        self, node_id: str, now: float | None = None, lease: float = LEASE_SECONDS
    ) -> bool:
        """Renew the node's liveness and the leases of its running attempts. False when
        it passed over one (locked by a transaction ending or reaping it): its keepers
        must not count on this beat (`slotline.fencing`)."""
        with self._transaction(write=True, serial=Serial.ROWS) as tx:
            now = tx.now() if now is None else now
            if tx.one("node_heartbeat", id=node_id, now=now) is None:
                tx.run(
                    "node_insert", id=node_id, host=socket.gethostname(), pid=os.getpid(), now=now
                )
            expires = now + lease
            tx.run("attempt_renew", node_id=node_id, lease_expires_at=expires)
            missed = tx.one("attempts_not_renewed", node_id=node_id, lease_expires_at=expires)
            return missed is None or not missed["n"]

    def record_usage(self, usage: dict[str, tuple[float, int]]) -> None:
        """Latest CPU% and RSS of running attempts' process trees ({attempt id: (cpu, rss)});
        the peaks are kept. Wakes no one: readers refresh on their own."""
        with self._transaction(write=True, serial=Serial.ROWS) as tx:
            for attempt_id, (cpu, rss) in usage.items():
                tx.run("attempt_usage", id=attempt_id, cpu_percent=float(cpu), rss_bytes=int(rss))

    def note_reconciled(self, task_id: str, attempt_id: str, action: str, **detail: Any) -> None:
        """Log what a starting node did with an attempt it found running: `adopted` (the
        process lives on), `collected` (its exit file told the outcome), `interrupted`."""
        with self._write() as tx:
            emit(tx, "reconciled", task_id, tx.now(), attempt=attempt_id, action=action, **detail)

    def note_fenced(
        self, task_id: str, attempt_id: str, node_id: str, reason: str, reclaimed: bool
    ) -> None:
        """Log that a run's keeper stopped it, its node's heartbeats unconfirmed for its
        lease (`slotline.fencing`); `reclaimed`: another node had finished it meanwhile."""
        with self._write() as tx:
            emit(
                tx, "fenced", task_id, tx.now(),
                attempt=attempt_id, node=node_id, reason=reason, reclaimed=reclaimed,
            )  # fmt: skip

    def set_pressure(
        self, node_id: str, reason: str | None, hold: bool, limit: int | None = None
    ) -> None:
        """Record (or clear) this node's resource-guard verdict, so that `status` can say
        why nothing starts there and ETAs play it; each node has its own. `limit` is the
        guard's adaptive limit (lower than max_concurrent), if any. Emits an `admission`
        event only when the node's verdict changes."""
        with self._write() as tx:
            now = tx.now()
            row = tx.one("node_get", id=node_id)
            same = row is not None and (row["pressure"], bool(row["pressure_hold"])) == (
                reason,
                hold,
            )
            if row is None or (same and row["pressure_limit"] == limit):
                tx.notify = False
                return
            since = None if reason is None else now
            tx.run(
                "node_set_pressure", id=node_id, reason=reason, hold=hold, limit=limit, since=since
            )
            emit(tx, "admission", None, now, node=node_id, reason=reason, hold=hold, limit=limit)

    def clock(self) -> float:
        """The store's clock (the database server's on PostgreSQL): nodes measure leases
        and timeouts by it, never by their own."""
        with self._transaction(write=False) as tx:
            return tx.now()

    def node(self, node_id: str) -> dict[str, Any] | None:
        """The node's row (host, pid, started_at, heartbeat_at), if it is registered."""
        with self._transaction(write=False) as tx:
            return tx.one("node_get", id=node_id)

    def register_node(self, node_id: str, now: float | None = None) -> None:
        """Register the node anew: what it published in an earlier life goes (it publishes
        its configuration again once registered, `publish_config`)."""
        with self._write() as tx:
            now = tx.now() if now is None else now
            tx.run("node_delete", id=node_id)
            tx.run("node_config_delete", node_id=node_id)
            tx.run("node_insert", id=node_id, host=socket.gethostname(), pid=os.getpid(), now=now)
            emit(tx, "node_started", None, now, node=node_id)

    def unregister_node(self, node_id: str) -> None:
        with self._write() as tx:
            tx.run("node_delete", id=node_id)
            tx.run("node_config_delete", node_id=node_id)
            emit(tx, "node_stopped", None, tx.now(), node=node_id)

    def live_attempts(self, node_id: str | None = None) -> list[Attempt]:
        """Unfinished attempts (of one node, or of all whose lease lapsed if node_id is None)."""
        with self._transaction(write=False) as tx:
            if node_id is None:
                rows = tx.rows("attempts_lease_lapsed", now=tx.now())
            else:
                rows = tx.rows("attempts_live_of_node", node_id=node_id)
            return [attempt_from_row(r) for r in rows]
