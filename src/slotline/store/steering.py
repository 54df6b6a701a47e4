"""The steering verbs: how a person or a supervising agent changes the line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slotline.errors import InvalidInput, InvalidTransition, SlotlineError
from slotline.models import Priority, Status, Task
from slotline.store import deps, ops
from slotline.store.queries import Tx
from slotline.store.rows import dumps
from slotline.store.settings_verbs import SETTING_RULES, SettingsVerbs
from slotline.transitions import CANCEL, RESTART, StopKind, StopRequest, check_transition

# SETTING_RULES is imported from here by the CLI and the server.
__all__ = ["BULK_VERBS", "SETTING_RULES", "BulkResult", "SteeringVerbs"]

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


class SteeringVerbs(SettingsVerbs):
    """cancel, terminate, boost, bump, move, priority, restart, hold, release, pause,
    resume, clear, limits. Each is one transaction that emits its event."""

    def cancel(self, ref: str, cascade: bool = False) -> Task:
        """Cancel a task. A task not running ends at once; a running one is asked to stop
        (TERM, then KILL) and ends when its process is gone, freeing its slot then.

        Raises:
            InvalidTransition: the task has already ended.
        """
        with self._write() as tx:
            now = tx.now()
            task = ops.resolve(tx, ref)
            self._cancel(tx, task, now)
            if cascade:
                stack = [task.id]
                while stack:
                    for row in tx.rows("tasks_children", parent_id=stack.pop()):
                        child = ops.load(tx, row["id"])
                        if not child.status.terminal:
                            self._cancel(tx, child, now)
                        stack.append(child.id)
            return ops.load(tx, task.id)

    def _cancel(self, tx: Tx, task: Task, now: float) -> None:
        check_transition("cancel", task.id, task.status)
        if task.status is Status.RUNNING:
            _request_stop(tx, task, CANCEL)
            ops.emit(tx, "cancel_requested", task.id, now, attempt=task.current_attempt)
            return
        tx.run(
            "task_end",
            id=task.id,
            status=Status.CANCELLED.value,
            status_reason="cancelled",
            now=now,
            exit_code=None,
            failure_reason=None,
        )
        ops.change(tx, task, "cancelled", Status.CANCELLED, now)
        deps.propagate_end(tx, task.id, Status.CANCELLED, now)

    def terminate(self, ref: str, reason: str = "by request") -> Task:
        """Stop a running task; it fails with "terminated: REASON" and its slot frees.

        Raises:
            InvalidTransition: the task is not running.
        """
        with self._write() as tx:
            task = ops.resolve(tx, ref)
            self._terminate(tx, task, tx.now(), reason)
            return ops.load(tx, task.id)

    def _terminate(self, tx: Tx, task: Task, now: float, reason: str) -> None:
        reason = reason.strip() or "by request"
        check_transition("terminate", task.id, task.status)
        _request_stop(tx, task, StopRequest.terminate(reason[:500]))
        ops.emit(
            tx, "terminate_requested", task.id, now, attempt=task.current_attempt, reason=reason
        )

    def boost(self, ref: str) -> Task:
        """Start next: move the task to position 1 without bypassing any limit."""
        with self._write() as tx:
            task = ops.resolve(tx, ref)
            check_transition("boost", task.id, task.status)
            first = (tx.one("first_queued_rank") or {}).get("rank")
            rank = ops.free_rank(tx, None, first) if first and first <= task.rank else task.rank
            tx.run("task_place", id=task.id, rank=rank, boosted=True, priority=int(task.priority))
            ops.emit(tx, "boosted", task.id, tx.now())
            return ops.load(tx, task.id)

    def bump(self, ref: str) -> Task:
        """Start now: the next dispatch starts this task whatever the limits say; its
        attempt is marked over-limit and nothing else starts until back under."""
        with self._write() as tx:
            task = ops.resolve(tx, ref)
            to = check_transition("bump", task.id, task.status)
            first = (tx.one("first_queued_rank") or {}).get("rank")
            if first and first <= task.rank:
                tx.run(
                    "task_place",
                    id=task.id,
                    rank=ops.free_rank(tx, None, first),
                    boosted=True,
                    priority=int(task.priority),
                )
            tx.run("task_start_now", id=task.id)
            ops.change(tx, task, "bumped", to, tx.now())
            return ops.load(tx, task.id)

    def move(
        self,
        ref: str,
        *,
        to: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> Task:
        """Move a queued task to position `to`, or just before/after another queued task.

        The task takes the band (boost and priority) of its new neighbours and a rank
        between theirs; no other task's row changes.
        """
        if sum(x is not None for x in (to, before, after)) != 1:
            raise InvalidInput("move needs exactly one of --to N, --before ID, --after ID")
        with self._write() as tx:
            now = tx.now()
            task = ops.resolve(tx, ref)
            check_transition("move", task.id, task.status)
            if task.status is not Status.QUEUED:
                raise InvalidTransition(
                    f"cannot move task {task.id[:8]}: it is {task.status}; release it first",
                    task_id=task.id,
                    status=task.status,
                )
            aging = ops.read_settings(tx)["aging_interval"]
            line = [t for t in ops.ordered_queue(tx, now, aging) if t.id != task.id]
            index = self._target_index(tx, task, line, to, before, after)
            prev = line[index - 1] if index > 0 else None
            nxt = line[index] if index < len(line) else None
            band_of = nxt or prev
            if band_of is None:
                return ops.load(tx, task.id)
            boosted, priority = band_of.boosted, band_of.priority
            if nxt is None:
                rank = ops.next_rank(tx)
            else:
                same = prev is not None and (prev.boosted, prev.priority) == (boosted, priority)
                rank = ops.free_rank(tx, prev.rank if same and prev else None, nxt.rank)
            tx.run("task_place", id=task.id, rank=rank, boosted=boosted, priority=int(priority))
            ops.emit(
                tx,
                "moved",
                task.id,
                now,
                position=index + 1,
                priority=priority.label,
                boosted=boosted,
            )
            return ops.load(tx, task.id)

    def _target_index(
        self,
        tx: Tx,
        task: Task,
        line: list[Task],
        to: int | None,
        before: str | None,
        after: str | None,
    ) -> int:
        if to is not None:
            if to < 1:
                raise InvalidInput(f"position must be 1 or more, got {to}")
            return min(to, len(line) + 1) - 1
        other = ops.resolve(tx, before or after or "")
        if other.id == task.id:
            raise InvalidInput("cannot move a task relative to itself")
        ids = [t.id for t in line]
        if other.id not in ids:
            raise InvalidInput(
                f"task {other.id[:8]} is {other.status}, not queued; move relative to a queued task"
            )
        index = ids.index(other.id)
        return index if before is not None else index + 1

    def set_priority(
        self, ref: str, level: str | int | Priority, reason: str | None = None
    ) -> Task:
        """Change a not-yet-started task's priority; it keeps its rank within the new band.
        A `reason` is recorded in the event."""
        priority = Priority.parse(level)
        with self._write() as tx:
            task = ops.resolve(tx, ref)
            self._set_priority(tx, task, tx.now(), priority, reason)
            return ops.load(tx, task.id)

    def _set_priority(
        self, tx: Tx, task: Task, now: float, priority: Priority, reason: str | None
    ) -> None:
        check_transition("priority", task.id, task.status)
        tx.run(
            "task_place", id=task.id, rank=task.rank, boosted=task.boosted, priority=int(priority)
        )
        data = {"from": task.priority.label, "to_priority": priority.label}
        if reason and reason.strip():
            data["reason"] = reason.strip()[:500]
        ops.emit(tx, "priority", task.id, now, **data)

    def restart(self, ref: str, force: bool = False) -> Task:
        """Put an ended or blocked task back in line (new attempt, history kept), at the tail
        of its band. A running task needs `force`: it is stopped first, and queued again
        once its process is gone, so two attempts never run at once.

        Raises:
            InvalidTransition: the task is queued/waiting/held, or running without force.
        """
        with self._write() as tx:
            task = ops.resolve(tx, ref)
            self._restart(tx, task, tx.now(), force)
            return ops.load(tx, task.id)

    def _restart(self, tx: Tx, task: Task, now: float, force: bool) -> None:
        if task.status is Status.RUNNING and force:
            check_transition("restart_running", task.id, task.status)
            _request_stop(tx, task, RESTART)
            ops.emit(tx, "restart_requested", task.id, now, attempt=task.current_attempt)
        else:
            check_transition("restart", task.id, task.status)
            self._reset(tx, task, now, refuse_blocked=True)

    def _reset(self, tx: Tx, task: Task, now: float, refuse_blocked: bool = False) -> None:
        """Put a task back in line for a new attempt, at the tail of its band.

        If a dependency has ended badly, a restart asked for now is refused; a forced
        restart whose run has just ended leaves the task blocked instead (its run is over
        either way, and its slot must free).
        """
        status, reason = deps.reset_status(tx, task)
        if status is Status.BLOCKED and refuse_blocked:
            raise InvalidTransition(
                f"cannot restart task {task.id[:8]}: it is {task.status} and its {reason}; "
                "restart that one first",
                task_id=task.id,
                status=task.status,
            )
        tx.run(
            "task_reset",
            id=task.id,
            status=status.value,
            status_reason=reason,
            rank=ops.next_rank(tx),
            queued_at=now if status is Status.QUEUED else None,
            now=now,
        )
        ops.change(tx, task, "restarted", status, now)
        if status is Status.BLOCKED:
            deps.propagate_end(tx, task.id, status, now)
        else:
            deps.unblock_dependents(tx, task.id, now)

    def hold(self, ref: str) -> Task:
        """Keep a queued task out of dispatch until released (a pending "start now" is
        dropped: holding it means it should not start)."""
        return self._simple(ref, "hold", "held")

    def release(self, ref: str) -> Task:
        """Put a held task back in line at its old place."""
        return self._simple(ref, "release", "released")

    def _simple(self, ref: str, verb: str, kind: str) -> Task:
        with self._write() as tx:
            task = ops.resolve(tx, ref)
            self._hold_or_release(tx, task, tx.now(), verb, kind)
            return ops.load(tx, task.id)

    def _hold_or_release(self, tx: Tx, task: Task, now: float, verb: str, kind: str) -> None:
        to = check_transition(verb, task.id, task.status)
        tx.run("task_set_status", id=task.id, status=to.value, status_reason=None)
        if verb == "hold" and task.start_now:
            tx.run("task_cancel_start_now", id=task.id)
        ops.change(tx, task, kind, to, now)

    def add_dependency(self, ref: str, dep_ref: str) -> Task:
        """Make a waiting or queued task also wait for `dep_ref`; a cycle is refused."""
        with self._write() as tx:
            now = tx.now()
            task = ops.resolve(tx, ref)
            check_transition("add_dependency", task.id, task.status)
            (dep,) = deps.resolve_dependencies(tx, [dep_ref])
            deps.check_no_cycle(tx, task.id, dep.id)
            if dep.id in task.depends_on:
                return task
            tx.run("dep_insert", task_id=task.id, dep_id=dep.id)
            tx.run("task_set_depends_on", id=task.id, depends_on=dumps([*task.depends_on, dep.id]))
            ops.emit(tx, "dependency_added", task.id, now, dependency=dep.id)
            status, reason = deps.initial_status([dep], hold=False)
            # A queued task now waits (or is blocked); a waiting one is blocked by a
            # dependency that ended badly, or it would wait forever.
            if status is not Status.QUEUED and status is not task.status:
                verb = "block" if status is Status.BLOCKED else "wait"
                check_transition(verb, task.id, task.status)
                tx.run("task_set_status", id=task.id, status=status.value, status_reason=reason)
                ops.change(tx, task, status.value, status, now, dependency=dep.id)
                if status is Status.BLOCKED:
                    deps.propagate_end(tx, task.id, status, now)
            return ops.load(tx, task.id)

    # -- queue-wide verbs ---------------------------------------------------------------

    def clear(self) -> int:
        """Cancel every task that has not started (blocked ones too); returns how many."""
        cancelled = 0
        with self._write() as tx:
            now = tx.now()
            # Dependents first: cancelling a task blocks the tasks waiting on it, and
            # those are cancelled when their (already fetched) row comes up.
            for status in _NOT_STARTED:
                for row in tx.rows("tasks_by_status", status=status.value, limit=1_000_000):
                    task = ops.load(tx, row["id"])
                    if task.status in _NOT_STARTED:
                        self._cancel(tx, task, now)
                        cancelled += 1
            ops.emit(tx, "cleared", None, now, count=cancelled)
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
                task = ops.resolve(tx, ref)
                if task.id in seen:
                    continue
                seen.add(task.id)
                try:
                    self._bulk_step(tx, task, now, verb, level, reason, force)
                except SlotlineError as exc:  # raised before the step wrote anything
                    result.skipped.append({"id": task.id, "error": str(exc)})
                else:
                    result.done.append(task.id)
            tx.notify = bool(result.done)
        return result

    def _bulk_step(
        self,
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
        task = ops.load(tx, task.id)
        if verb == "cancel":
            self._cancel(tx, task, now)
        elif verb == "terminate":
            self._terminate(tx, task, now, reason or "by request")
        elif verb == "priority":
            assert level is not None
            self._set_priority(tx, task, now, level, reason)
        elif verb == "restart":
            self._restart(tx, task, now, force)
        else:
            self._hold_or_release(tx, task, now, verb, "held" if verb == "hold" else "released")

    def emergency_stop(self, reason: str = "emergency stop") -> list[str]:
        """Pause dispatch and ask every running task to stop, in one transaction; returns
        the ids of the tasks asked to stop. They fail with "terminated: REASON"."""
        reason = reason.strip() or "emergency stop"
        with self._write() as tx:
            now = tx.now()
            ops.write_setting(tx, "paused", True)
            ops.emit(tx, "settings", None, now, paused=True, reason=reason)
            stopped = []
            for row in tx.rows("tasks_running"):
                task = ops.load(tx, row["id"])
                if task.kill_request is None:
                    self._terminate(tx, task, now, reason)
                    stopped.append(task.id)
            ops.emit(tx, "emergency_stop", None, now, reason=reason, count=len(stopped))
        return stopped


def _request_stop(tx: Tx, task: Task, stop: StopRequest) -> None:
    """Ask the node running `task` to stop it; the run's end then applies `stop.verb`."""
    restart = stop.kind is StopKind.RESTART
    tx.run("task_kill_request", id=task.id, kill_request=str(stop), restart_requested=restart)
