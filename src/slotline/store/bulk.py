"""The queue-wide verbs: one change applied to many tasks at once (bulk, clear) and the
emergency stop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slotline.bounds import parse_id
from slotline.errors import InvalidInput, SlotlineError
from slotline.models import Priority, Status, Task
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.rows import task_from_row
from slotline.store.settings import write_setting
from slotline.store.statements import Ids, Read
from slotline.store.steps import (
    cancel_task,
    hold_or_release,
    restart_task,
    set_priority_of,
    terminate_task,
)
from slotline.store.tasks import load, resolve

# The reads `_read_ahead` stands in for.
_PRELOADED = ("task_get", "dependents_of")

# The verbs `bulk` applies to many tasks at once.
BULK_VERBS = ("cancel", "terminate", "priority", "hold", "release", "restart")
# The most tasks one bulk call changes (a filter matching more is refused, not cut).
MAX_BULK = 100_000
# The most tasks one transaction of a bulk verb changes: a few milliseconds of the writer.
BULK_CHUNK = 500
# What a bulk verb calls after each chunk: (tasks done or skipped so far, of how many).
Progress = Callable[[int, int], None]


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
    """Verbs over many tasks, one event per task changed, committed in chunks of
    BULK_CHUNK tasks: a chunk holds the writer for milliseconds, and other writers (a
    submit, a claim) take their turn between two chunks however long the whole call."""

    def clear(self, progress: Progress | None = None) -> int:
        """Cancel every task that has not started (blocked ones too); returns how many.
        The tasks are those not started when it begins (one read), cancelled in chunks as
        `bulk` does; a task submitted meanwhile is left in line."""
        with self._transaction(write=False) as tx:
            # Dependents first: cancelling a task blocks the tasks waiting on it, and
            # those are cancelled when their turn comes.
            ids = [
                row["id"]
                for status in _NOT_STARTED
                for row in tx.rows("tasks_by_status", status=status.value, limit=1_000_000)
            ]
        result = self._in_chunks("cancel", ids, _Step("cancel"), progress)
        with self._write() as tx:
            emit(tx, "cleared", None, tx.now(), count=len(result.done))
        return len(result.done)

    def bulk_targets(self, refs: list[str], user: str | None = None) -> list[Task]:
        """The tasks `refs` name (ids, dashed UUIDs or unique prefixes; with `user`, only
        that user's), in their order, read in one transaction: full ids a chunk at a
        time in one statement each, only prefixes one by one. Without the attempts,
        positions and estimates a task's page shows (a bulk caller needs none).

        Raises:
            NotFound, AmbiguousId: a ref names no task, or several.
        """
        with self._transaction(write=False) as tx:
            return _resolve_all(tx, refs, user)

    def bulk(
        self,
        verb: str,
        refs: list[str],
        *,
        priority: str | int | Priority | None = None,
        reason: str | None = None,
        force: bool = False,
        progress: Progress | None = None,
    ) -> BulkResult:
        """Apply `verb` (one of BULK_VERBS) to every task of `refs`, one event per task
        changed. A task the verb does not apply to (already ended, not running…) is
        skipped with the reason, and the others go on.

        Every ref is resolved first, in one read: a ref that names no task changes
        nothing. The tasks are then changed BULK_CHUNK at a time, each chunk its own
        transaction, and `progress(changed_or_skipped, total)` is called after each
        commit. If a chunk fails (the store is gone), the chunks before it stay
        committed and the error is raised; calling again with the same refs finishes
        the work (the tasks already changed are skipped, with why).

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
        ids = list(dict.fromkeys(t.id for t in self.bulk_targets(refs)))
        return self._in_chunks(verb, ids, _Step(verb, level, reason, force), progress)

    def _in_chunks(
        self, verb: str, ids: list[str], step: _Step, progress: Progress | None
    ) -> BulkResult:
        result = BulkResult(verb)
        for start in range(0, len(ids), BULK_CHUNK):
            chunk = ids[start : start + BULK_CHUNK]
            with self._write() as tx:
                now = tx.now()
                _read_ahead(tx, chunk)
                changed = False
                for task_id in chunk:
                    try:
                        step.apply(tx, task_id, now)
                    except SlotlineError as exc:  # raised before the step wrote anything
                        result.skipped.append({"id": task_id, "error": str(exc)})
                    else:
                        result.done.append(task_id)
                        changed = True
                tx.forget_preloaded(_PRELOADED)
                tx.notify = changed
            if progress is not None:
                progress(start + len(chunk), len(ids))
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


@dataclass(frozen=True, slots=True)
class _Step:
    """One verb with its arguments, applied to one task at a time."""

    verb: str
    level: Priority | None = None
    reason: str | None = None
    force: bool = False

    def apply(self, tx: Tx, task_id: str, now: float) -> None:
        # Read now, not when the refs were resolved: an earlier step of the same call
        # may have changed it (a cancelled parent's dependents are blocked), and so may
        # another writer between two chunks.
        task = load(tx, task_id)
        if self.verb == "cancel":
            cancel_task(tx, task, now)
        elif self.verb == "terminate":
            terminate_task(tx, task, now, self.reason or "by request")
        elif self.verb == "priority":
            assert self.level is not None
            set_priority_of(tx, task, now, self.level, self.reason)
        elif self.verb == "restart":
            restart_task(tx, task, now, self.force)
        else:
            kind = "held" if self.verb == "hold" else "released"
            hold_or_release(tx, task, now, self.verb, kind)


def _resolve_all(tx: Tx, refs: list[str], user: str | None) -> list[Task]:
    full = [parse_id(ref) for ref in refs]
    found: dict[str, Task] = {}
    for start in range(0, len(full), BULK_CHUNK):
        chunk = Ids(dict.fromkeys(full[start : start + BULK_CHUNK]))
        for row in tx.rows("tasks_of_ids", ids=chunk):
            task = task_from_row(row)
            if user is None or task.user == user:
                found[task.id] = task
    return [found[ref] if ref in found else resolve(tx, ref, user) for ref in full]


def _read_ahead(tx: Tx, ids: list[str]) -> None:
    """Read a chunk's tasks and their dependents in two statements, for the reads of
    each step (`load`, `dependents_of`) to take. A step changes its task after reading
    it, and a dependent after reading it, so a row is read ahead only for its first
    read, which comes before any change of it (`Tx.preload`)."""
    by_ids = Ids(ids)
    tasks, dependents = tx.read_together(
        [Read("tasks_of_ids", {"ids": by_ids}), Read("dependents_of_tasks", {"ids": by_ids})]
    )
    for row in tasks:
        tx.preload("task_get", {"id": row["id"]}, [row])
    of: dict[str, list[dict[str, Any]]] = {task_id: [] for task_id in ids}
    for row in dependents:
        of[row["dep_id"]].append({"task_id": row["task_id"]})
    for task_id, rows in of.items():
        tx.preload("dependents_of", {"dep_id": task_id}, rows)
