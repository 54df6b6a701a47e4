"""Stalled runs: a running attempt that printed nothing for too long is marked stalled
(a `stalled` event, once per quiet spell) and unmarked when it prints again (an
`unstalled` event). The node's stall watch (`node/stall.py`) decides when; the statement
that ends or requeues a task clears its mark. An interactive run whose terminal went
quiet while it waits is marked as needing input the same way (`needs_input`, then
`output_resumed`; `node/needs_input.py` decides when)."""

from __future__ import annotations

from slotline.store.core import StoreCore
from slotline.store.events import emit


class StallVerbs(StoreCore):
    """Marking running attempts stalled, and no longer stalled."""

    def mark_stalled(
        self, task_id: str, attempt_id: str, reason: str, now: float | None = None
    ) -> bool:
        """Mark the running attempt's task stalled and log a `stalled` event, once per
        quiet spell; False if it already was, or the attempt is no longer current."""
        with self._write() as tx:
            now = tx.now() if now is None else now
            if not tx.rows("task_stall", id=task_id, attempt=attempt_id, at=now):
                tx.notify = False
                return False
            emit(tx, "stalled", task_id, now, attempt=attempt_id, reason=reason)
            return True

    def mark_needs_input(
        self, task_id: str, attempt_id: str, reason: str, now: float | None = None
    ) -> bool:
        """Mark the running interactive attempt's task as needing input and log a
        `needs_input` event, once per quiet spell; False if it already was, or the attempt
        is no longer current."""
        with self._write() as tx:
            now = tx.now() if now is None else now
            if not tx.rows("task_needs_input", id=task_id, attempt=attempt_id, at=now):
                tx.notify = False
                return False
            emit(tx, "needs_input", task_id, now, attempt=attempt_id, reason=reason)
            return True

    def clear_needs_input(self, task_id: str, attempt_id: str, now: float | None = None) -> bool:
        """The run that needed input printed again (an `output_resumed` event)."""
        with self._write() as tx:
            now = tx.now() if now is None else now
            if not tx.rows("task_input_done", id=task_id, attempt=attempt_id):
                tx.notify = False
                return False
            emit(tx, "output_resumed", task_id, now, attempt=attempt_id)
            return True

    def clear_stalled(self, task_id: str, attempt_id: str, now: float | None = None) -> bool:
        """The stalled run printed again: no longer stalled (an `unstalled` event)."""
        with self._write() as tx:
            now = tx.now() if now is None else now
            if not tx.rows("task_unstall", id=task_id, attempt=attempt_id):
                tx.notify = False
                return False
            emit(tx, "unstalled", task_id, now, attempt=attempt_id)
            return True
