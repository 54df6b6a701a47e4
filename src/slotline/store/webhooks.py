"""Webhook and command-hook delivery state: cursors, leases and the delivery log.

The event log is the outbox: every change already appends its event in the transaction
that makes it, so a hook needs only a cursor (the last `seq` it delivered), advanced
after a delivery succeeded. One node delivers to a hook at a time, holding that hook's
lease row (nodes may configure different hooks: each delivers its own), taken by
compare-and-set with an expiry; a node that dies mid-delivery loses its leases, and the
next holder delivers again from the cursor (a duplicate carries the same `seq`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from slotline.clock import iso
from slotline.store.core import StoreCore
from slotline.store.events import last_seq

# How many deliveries `notify log` keeps.
LOG_KEEP = 5000


def _lease(hook: str) -> str:
    """The name of a hook's delivery lease (apart from the one lease of old, `deliver`)."""
    return f"hook:{hook}"


@dataclass(frozen=True, slots=True)
class Delivery:
    """One try to deliver one event to one hook (a webhook or a command)."""

    at: float
    hook: str
    event: str
    seq: int
    task_id: str | None
    node_id: str
    attempt: int
    ok: bool
    # The HTTP status of a webhook's answer, or a command's exit code; None: none came.
    status: int | None = None
    error: str | None = None
    took: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": iso(self.at),
            "hook": self.hook,
            "event": self.event,
            "seq": self.seq,
            "task_id": self.task_id,
            "node_id": self.node_id,
            "attempt": self.attempt,
            "ok": self.ok,
            "status": self.status,
            "error": self.error,
            "took": None if self.took is None else round(self.took, 3),
        }


class WebhookVerbs(StoreCore):
    """Cursors, the delivery lease and log of hooks."""

    def notify_cursors(self, hooks: Iterable[str], now: float | None = None) -> dict[str, int]:
        """Each hook's cursor; a hook seen for the first time starts at the end of the
        event log (it hears of what happens from now on, not of the past)."""
        with self._write() as tx:
            tx.notify = False
            now = tx.now() if now is None else now
            end = last_seq(tx)
            for hook in hooks:
                tx.run("notify_cursor_add", hook=hook, seq=end, now=now)
            return {row["hook"]: int(row["seq"]) for row in tx.rows("notify_cursors")}

    def take_notify_leases(
        self, node_id: str, hooks: Iterable[str], lease: float, now: float | None = None
    ) -> set[str]:
        """Take or renew the delivery lease of each of `hooks` for `lease` seconds: the
        hooks whose lease `node_id` holds now (not those another node holds and that
        have not expired)."""
        with self._write() as tx:
            tx.notify = False
            now = tx.now() if now is None else now
            held = set()
            for hook in hooks:
                name, until = _lease(hook), now + lease
                tx.run("notify_lease_add", lease=name, node=node_id, expires_at=until)
                if tx.rows(
                    "notify_lease_take", lease=name, node=node_id, expires_at=until, now=now
                ):
                    held.add(hook)
            return held

    def drop_notify_lease(self, node_id: str) -> None:
        """Give up every hook's lease `node_id` holds (a node stopping), so another node
        delivers at once."""
        with self._write() as tx:
            tx.notify = False
            tx.run("notify_lease_drop", node=node_id)

    def advance_notify(self, node_id: str, hook: str, seq: int, now: float | None = None) -> bool:
        """Move `hook`'s cursor to `seq`; False (nothing moved) unless `node_id` still
        holds the hook's lease."""
        with self._write() as tx:
            tx.notify = False
            now = tx.now() if now is None else now
            moved = tx.rows(
                "notify_cursor_advance", node=node_id, hook=hook, lease=_lease(hook), seq=seq,
                now=now,
            )  # fmt: skip
            return bool(moved)

    def log_notify(self, delivery: Delivery) -> None:
        """Record one delivery or failure (the oldest beyond LOG_KEEP go)."""
        with self._write() as tx:
            tx.notify = False
            tx.run(
                "notify_log_add",
                at=delivery.at,
                hook=delivery.hook,
                event=delivery.event,
                seq=delivery.seq,
                task_id=delivery.task_id,
                node=delivery.node_id,
                attempt=delivery.attempt,
                ok=delivery.ok,
                status=delivery.status,
                error=delivery.error,
                took=delivery.took,
            )
            tx.run("notify_log_prune", keep=LOG_KEEP)

    def notify_log(self, limit: int = 100) -> list[Delivery]:
        """The last `limit` deliveries and failures, newest first."""
        with self._transaction(write=False) as tx:
            return [_delivery(row) for row in tx.rows("notify_log_recent", limit=limit)]


def _delivery(row: dict[str, Any]) -> Delivery:
    return Delivery(
        at=float(row["at"]),
        hook=row["hook"],
        event=row["event"],
        seq=int(row["seq"]),
        task_id=row["task_id"],
        node_id=row["node_id"],
        attempt=int(row["attempt"]),
        ok=bool(row["ok"]),
        status=row["status"],
        error=row["error"],
        took=None if row["took"] is None else float(row["took"]),
    )
