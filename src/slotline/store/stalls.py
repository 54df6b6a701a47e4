"""Stalled runs: a running attempt that printed nothing for too long is marked stalled
(a `stalled` event, once per quiet spell) and unmarked when it prints again (an
`unstalled` event). The node's stall watch (`node/stall.py`) decides when; the statement
that ends or requeues a task clears its mark. An interactive run whose terminal went
quiet while it waits is marked as needing input the same way (`needs_input`, then
`output_resumed`; `node/needs_input.py` decides when)."""

from __future__ import annotations

from slotline.errors import NotFound
from slotline.pacing import backoff
from slotline.scheduler import policy
from slotline.store import backoff as provider
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.rows import task_from_row
from slotline.store.settings import read_settings


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
        self,
        task_id: str,
        attempt_id: str,
        reason: str,
        now: float | None = None,
        release: bool = False,
    ) -> bool:
        """Mark the running interactive attempt's task as needing input and log a
        `needs_input` event, once per quiet spell; with `release`, it gives its slot back
        meanwhile (the limits no longer count it: a claim may fill the slot). False if it
        already was marked, or the attempt is no longer current."""
        with self._write() as tx:
            now = tx.now() if now is None else now
            marked = tx.rows(
                "task_needs_input", id=task_id, attempt=attempt_id, at=now, release=release
            )
            if not marked:
                tx.notify = False
                return False
            data = {"released": True} if release else {}
            emit(tx, "needs_input", task_id, now, attempt=attempt_id, reason=reason, **data)
            # Woken, a node's claim fills the slot it gave back.
            tx.notify = release
            return True

    def retake_slot(
        self, task_id: str, attempt_id: str, force: bool = False, now: float | None = None
    ) -> str | None:
        """A run that gave its slot back takes one again, if the limits have room beside
        what runs (checked under the write lock claims take, so the two never both take
        the last slot); with `force`, even over them (it printed on its own: it is at work
        again). Returns None once it holds one (or never gave it back), else the limit
        that keeps it out, in words."""
        with self._write() as tx:
            now = tx.now() if now is None else now
            rows = tx.rows("task_get", id=task_id)
            if not rows:
                raise NotFound(f"no task {task_id}", task_id=task_id)
            task = task_from_row(rows[0])
            if task.slot_released is None or task.current_attempt != attempt_id:
                tx.notify = False
                return None
            if not force:
                running = [
                    t
                    for r in tx.rows("tasks_running")
                    if (t := task_from_row(r)).holds_slot and t.id != task_id
                ]
                # The limits as a claim has them: a provider's back-off lowers them too
                # (a node's resource guard does not: it holds its own claims only).
                limits = backoff.limits_under(read_settings(tx).limits, provider.throttles(tx))
                full = policy.kept_out(limits, running, task)
                if full is not None:
                    tx.notify = False
                    return full
            tx.rows("task_slot_retake", id=task_id, attempt=attempt_id)
            emit(tx, "slot_retaken", task_id, now, attempt=attempt_id, forced=force)
            tx.notify = False
            return None

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
