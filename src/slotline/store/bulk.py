"""The queue-wide verbs: one change applied to many tasks at once (bulk, clear) and the
emergency stop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slotline.errors import InvalidInput, SlotlineError
from slotline.models import Priority, Status, Task
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.settings import write_setting
from slotline.store.steering import (
    cancel_task,
    hold_or_release,
    restart_task,
    set_priority_of,
    terminate_task,
)
from slotline.store.tasks import load, resolve

# The verbs `bulk` applies to many tasks at once.
BULK_VERBS = ("cancel", "terminate", "priority", "hold", "release", "restart")
# The most tasks one bulk call changes (a filter matching more is refused, not cut).
MAX_BULK = 100_000


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk verb did: the tasks it changed, and those it skipped, with why."""

    verb: str
    done: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"verb": self.verb, "done": self.done, "skipped": self.skipped}


# What `clear` cancels, in the order it does: waiting and blocked tasks before the
# tasks they depend on.
_NOT_STARTED = (Status.WAITING, Status.BLOCKED, Status.HELD, Status.QUEUED)


class BulkVerbs(StoreCore):
    """Verbs over many tasks, each one transaction with one event per task changed."""

    def clear(self) -> int:
        """Cancel every task that has not started (blocked ones too); returns how many."""
        cancelled = 0
        with self._write() as tx:
            now = tx.now()
            # Dependents first: cancelling a task blocks the tasks waiting on it, and
            # those are cancelled when their (already fetched) row comes up.
            for status in _NOT_STARTED:
                for row in tx.rows("tasks_by_status", status=status.value, limit=1_000_000):
                    task = load(tx, row["id"])
                    if task.status in _NOT_STARTED:
                        cancel_task(tx, task, now)
                        cancelled += 1
            emit(tx, "cleared", None, now, count=cancelled)
        return cancelled

    def bulk(
        self,
        verb: str,
        refs: list[str],
        *,
        priority: str | int | Priority | None = None,
        reason: str | None = None,
        force: bool = False,
    ) -> BulkResult:
        """Apply `verb` (one of BULK_VERBS) to every task of `refs` in one transaction, one
        event per task changed. A task the verb does not apply to (already ended, not
        running…) is skipped with the reason, and the others go on.

        Raises:
            InvalidInput: an unknown verb, a priority missing or given to another verb,
                or more than MAX_BULK tasks.
            NotFound, AmbiguousId: a ref names no task, or several (nothing changed).
        """
        if verb not in BULK_VERBS:
            raise InvalidInput(f"unknown bulk verb {verb!r}; use one of {', '.join(BULK_VERBS)}")
        if (priority is None) == (verb == "priority"):
            raise InvalidInput("a priority is needed by the verb priority, and only by it")
        if len(refs) > MAX_BULK:
            raise InvalidInput(f"at most {MAX_BULK} tasks per bulk call, got {len(refs)}")
        level = None if priority is None else Priority.parse(priority)
        result = BulkResult(verb)
        with self._write() as tx:
            now = tx.now()
            seen: set[str] = set()
            for ref in refs:
                task = resolve(tx, ref)
                if task.id in seen:
                    continue
                seen.add(task.id)
                try:
                    _bulk_step(tx, task, now, verb, level, reason, force)
                except SlotlineError as exc:  # raised before the step wrote anything
                    result.skipped.append({"id": task.id, "error": str(exc)})
                else:
                    result.done.append(task.id)
            tx.notify = bool(result.done)
        return result

    def emergency_stop(self, reason: str = "emergency stop") -> list[str]:
        """Pause dispatch and ask every running task to stop, in one transaction; returns
        the ids of the tasks asked to stop. They fail with "terminated: REASON"."""
        reason = reason.strip() or "emergency stop"
        with self._write() as tx:
            now = tx.now()
            write_setting(tx, "paused", True)
            emit(tx, "settings", None, now, paused=True, reason=reason)
            stopped = []
            for row in tx.rows("tasks_running"):
                task = load(tx, row["id"])
                if task.kill_request is None:
                    terminate_task(tx, task, now, reason)
                    stopped.append(task.id)
            emit(tx, "emergency_stop", None, now, reason=reason, count=len(stopped))
        return stopped


def _bulk_step(
    tx: Tx,
    task: Task,
    now: float,
    verb: str,
    level: Priority | None,
    reason: str | None,
    force: bool,
) -> None:
    # A task changed by an earlier step of the same call (a cancelled parent's
    # dependents are blocked) is read again, so each step sees the current status.
    task = load(tx, task.id)
    if verb == "cancel":
        cancel_task(tx, task, now)
    elif verb == "terminate":
        terminate_task(tx, task, now, reason or "by request")
    elif verb == "priority":
        assert level is not None
        set_priority_of(tx, task, now, level, reason)
    elif verb == "restart":
        restart_task(tx, task, now, force)
    else:
        hold_or_release(tx, task, now, verb, "held" if verb == "hold" else "released")
