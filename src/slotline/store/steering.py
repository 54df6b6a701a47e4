"""The steering verbs: how a person or a supervising agent changes the line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slotline.errors import AccessDenied, InvalidInput, InvalidTransition
from slotline.models import Priority, Status, Task
from slotline.scheduler import policy
from slotline.store import deps
from slotline.store.core import StoreCore
from slotline.store.estimates import IN_LINE
from slotline.store.events import change, emit
from slotline.store.queries import Tx
from slotline.store.readback import read_back
from slotline.store.reads import estimated, shown
from slotline.store.rows import attempt_from_row, dumps, task_from_row
from slotline.store.settings import read_settings
from slotline.store.steps import (
    cancel_task,
    hold_or_release,
    restart_task,
    set_priority_of,
    terminate_task,
)
from slotline.store.tasks import free_rank, load, next_rank, ordered_queue, resolve
from slotline.transitions import check_transition

# The verbs `SteeringVerbs.steer` runs: each has a `_VERB(tx, task, …)` step.
STEERED = frozenset(
    {"cancel", "terminate", "boost", "bump", "move", "set_priority", "restart", "hold", "release"}
)


class SteeringVerbs(StoreCore):
    """cancel, terminate, boost, bump, move, priority, restart, hold, release and added
    dependencies, of one task each. Each is one transaction that emits its event; the
    steps they share with the bulk verbs and the schedules are in `steps.py`."""

    def cancel(self, ref: str, cascade: bool = False) -> Task:
        """Cancel a task. A task not running ends at once; a running one is asked to stop
        (TERM, then KILL) and ends when its process is gone, freeing its slot then.

        Raises:
            InvalidTransition: the task has already ended.
        """
        with self._write() as tx:
            return self._cancel(tx, resolve(tx, ref), cascade)

    def _cancel(self, tx: Tx, task: Task, cascade: bool = False) -> Task:
        now = tx.now()
        cancel_task(tx, task, now)
        if cascade:
            stack = [task.id]
            while stack:
                for row in tx.rows("tasks_children", parent_id=stack.pop()):
                    child = load(tx, row["id"])
                    if not child.status.terminal:
                        cancel_task(tx, child, now)
                    stack.append(child.id)
        return load(tx, task.id)

    def terminate(
        self,
        ref: str,
        reason: str = "by request",
        resumable: bool = False,
        *,
        attempt_id: str | None = None,
    ) -> Task:
        """Stop a running task; it fails with "terminated: REASON" and its slot frees.
        `resumable`: its run is marked so that its next attempt (a restart) continues
        the agent's session through the agent type's `resume` template. `attempt_id`:
        only if that attempt is still the task's current one (a node stopping its own
        run, never another node's later attempt).

        Raises:
            InvalidTransition: the task is not running, or not that attempt.
        """
        with self._write() as tx:
            task = resolve(tx, ref)
            if attempt_id is not None and task.current_attempt != attempt_id:
                raise InvalidTransition(
                    f"attempt {attempt_id[:8]} of task {task.id[:8]} is no longer current",
                    task_id=task.id,
                )
            return self._terminate(tx, task, reason, resumable)

    def _terminate(self, tx: Tx, task: Task, reason: str, resumable: bool = False) -> Task:
        terminate_task(tx, task, tx.now(), reason)
        if resumable and task.current_attempt is not None:
            tx.run("attempt_resumable", id=task.current_attempt)
        return load(tx, task.id)

    def boost(self, ref: str) -> Task:
        """Start next: move the task to position 1 without bypassing any limit."""
        with self._write() as tx:
            return self._boost(tx, resolve(tx, ref))

    def _boost(self, tx: Tx, task: Task) -> Task:
        check_transition("boost", task.id, task.status)
        first = (tx.one("first_queued_rank") or {}).get("rank")
        rank = free_rank(tx, None, first) if first and first <= task.rank else task.rank
        tx.run("task_place", id=task.id, rank=rank, boosted=True, priority=int(task.priority))
        emit(tx, "boosted", task.id, tx.now())
        return load(tx, task.id)

    def bump(self, ref: str, allowance: int | None = None) -> Task:
        """Start now: the next dispatch starts this task whatever the limits say; its
        attempt is marked over-limit and nothing else starts until back under.

        Args:
            allowance: the runs the task's user may have started over the limit at once
                (`users.start_now`, for a user's own bump); None: no bound (an admin's).

        Raises:
            AccessDenied: the task would start over the limit and its user has as many
                runs over it (running or bumped) as `allowance`.
        """
        with self._write() as tx:
            return self._bump(tx, resolve(tx, ref), allowance)

    def _bump(self, tx: Tx, task: Task, allowance: int | None = None) -> Task:
        to = check_transition("bump", task.id, task.status)
        if allowance is not None:
            _within_allowance(tx, task, allowance)
        first = (tx.one("first_queued_rank") or {}).get("rank")
        if first and first <= task.rank:
            tx.run(
                "task_place",
                id=task.id,
                rank=free_rank(tx, None, first),
                boosted=True,
                priority=int(task.priority),
            )
        tx.run("task_start_now", id=task.id)
        change(tx, task, "bumped", to, tx.now())
        return load(tx, task.id)

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
        _one_place(to, before, after)
        with self._write() as tx:
            return self._move(tx, resolve(tx, ref), to=to, before=before, after=after)

    def _move(
        self,
        tx: Tx,
        task: Task,
        *,
        to: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> Task:
        _one_place(to, before, after)
        now = tx.now()
        check_transition("move", task.id, task.status)
        if task.status is not Status.QUEUED:
            raise InvalidTransition(
                f"cannot move task {task.id[:8]}: it is {task.status}; release it first",
                task_id=task.id,
                status=task.status,
            )
        aging = read_settings(tx)["aging_interval"]
        line = [t for t in ordered_queue(tx, now, aging) if t.id != task.id]
        index = _target_index(tx, task, line, to, before, after)
        prev = line[index - 1] if index > 0 else None
        nxt = line[index] if index < len(line) else None
        band_of = nxt or prev
        if band_of is None:
            return load(tx, task.id)
        boosted, priority = band_of.boosted, band_of.priority
        if nxt is None:
            rank = next_rank(tx)
        else:
            same = prev is not None and (prev.boosted, prev.priority) == (boosted, priority)
            rank = free_rank(tx, prev.rank if same and prev else None, nxt.rank)
        tx.run("task_place", id=task.id, rank=rank, boosted=boosted, priority=int(priority))
        emit(
            tx,
            "moved",
            task.id,
            now,
            position=index + 1,
            priority=priority.label,
            boosted=boosted,
        )
        return load(tx, task.id)

    def set_priority(
        self, ref: str, level: str | int | Priority, reason: str | None = None
    ) -> Task:
        """Change a not-yet-started task's priority; it keeps its rank within the new band.
        A `reason` is recorded in the event."""
        priority = Priority.parse(level)
        with self._write() as tx:
            return self._set_priority(tx, resolve(tx, ref), priority, reason)

    def _set_priority(
        self, tx: Tx, task: Task, level: str | int | Priority, reason: str | None = None
    ) -> Task:
        set_priority_of(tx, task, tx.now(), Priority.parse(level), reason)
        return load(tx, task.id)

    def restart(self, ref: str, force: bool = False) -> Task:
        """Put an ended or blocked task back in line (new attempt, history kept), at the tail
        of its band. A running task needs `force`: it is stopped first, and queued again
        once its process is gone, so two attempts never run at once.

        Raises:
            InvalidTransition: the task is queued/waiting/held, or running without force.
        """
        with self._write() as tx:
            return self._restart(tx, resolve(tx, ref), force)

    def _restart(self, tx: Tx, task: Task, force: bool = False) -> Task:
        restart_task(tx, task, tx.now(), force)
        return load(tx, task.id)

    def hold(self, ref: str) -> Task:
        """Keep a queued task out of dispatch until released (a pending "start now" is
        dropped: holding it means it should not start)."""
        return self._simple(ref, "hold", "held")

    def release(self, ref: str) -> Task:
        """Put a held task back in line at its old place."""
        return self._simple(ref, "release", "released")

    def _simple(self, ref: str, verb: str, kind: str) -> Task:
        with self._write() as tx:
            return self._hold_or_release(tx, resolve(tx, ref), verb, kind)

    def _hold(self, tx: Tx, task: Task) -> Task:
        return self._hold_or_release(tx, task, "hold", "held")

    def _release(self, tx: Tx, task: Task) -> Task:
        return self._hold_or_release(tx, task, "release", "released")

    def _hold_or_release(self, tx: Tx, task: Task, verb: str, kind: str) -> Task:
        hold_or_release(tx, task, tx.now(), verb, kind)
        return load(tx, task.id)

    def steer(
        self,
        verb: str,
        ref: str,
        *args: Any,
        user: str | None = None,
        allowed: Callable[[Task, str], None] | None = None,
        seen: Callable[[Task, str], None] | None = None,
        **options: Any,
    ) -> tuple[Task, Task]:
        """A steering verb (one of `STEERED`) and what its caller shows, in one
        transaction: the task `ref` names (of `user`, if given; `allowed(task, ref)`
        raises to refuse it, before anything changes), changed by `verb` with `args` and
        `options`, then read back as `get` reads it (but its ETA, a simulation of the
        line, in a read after the commit: never under the writer). A move's `before` and
        `after` are resolved as `ref` is (of `user`; `seen` raises to refuse one).
        Returns the task before and after.

        Raises:
            NotFound, AmbiguousId: as `get`; and whatever the verb or `allowed` raises.
        """
        if verb not in STEERED:
            raise InvalidInput(f"not a steering verb: {verb!r}")
        with self._write() as tx:
            task = resolve(tx, ref, user)
            if allowed is not None:
                allowed(task, ref)
            for side in ("before", "after"):
                if options.get(side) is not None:
                    other = resolve(tx, options[side], user)
                    if seen is not None:
                        seen(other, options[side])
                    options[side] = other.id
            changed = getattr(self, f"_{verb}")(tx, task, *args, **options)
            # A read that fails answers with the task as the verb left it (`read_back`).
            after = read_back(lambda _: shown(tx, self.url, changed, estimate=False), changed)
        if after.status not in IN_LINE:
            return task, after
        # The ETA simulates the line: read after the commit, never holding the writer.
        return task, read_back(lambda _: self._estimated(after), after)

    def _estimated(self, task: Task) -> Task:
        with self._transaction(write=False) as tx:
            return estimated(tx, self.url, task)

    def add_dependency(self, ref: str, dep_ref: str) -> Task:
        """Make a waiting or queued task also wait for `dep_ref`; a cycle is refused."""
        with self._write() as tx:
            now = tx.now()
            task = resolve(tx, ref)
            check_transition("add_dependency", task.id, task.status)
            (dep,) = deps.resolve_dependencies(tx, [dep_ref])
            deps.check_no_cycle(tx, task.id, dep.id)
            if dep.id in task.depends_on:
                return task
            tx.run("dep_insert", task_id=task.id, dep_id=dep.id)
            tx.run("task_set_depends_on", id=task.id, depends_on=dumps([*task.depends_on, dep.id]))
            emit(tx, "dependency_added", task.id, now, dependency=dep.id)
            status, reason = deps.initial_status([dep], hold=False)
            # A queued task now waits (or is blocked); a waiting one is blocked by a
            # dependency that ended badly, or it would wait forever.
            if status is not Status.QUEUED and status is not task.status:
                verb = "block" if status is Status.BLOCKED else "wait"
                check_transition(verb, task.id, task.status)
                tx.run("task_set_status", id=task.id, status=status.value, status_reason=reason)
                change(tx, task, status.value, status, now, dependency=dep.id)
                if status is Status.BLOCKED:
                    deps.propagate_end(tx, task.id, status, now)
            return load(tx, task.id)


def _one_place(to: int | None, before: str | None, after: str | None) -> None:
    if sum(x is not None for x in (to, before, after)) != 1:
        raise InvalidInput("move needs exactly one of --to N, --before ID, --after ID")


def _target_index(
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
    other = resolve(tx, before or after or "")
    if other.id == task.id:
        raise InvalidInput("cannot move a task relative to itself")
    ids = [t.id for t in line]
    if other.id not in ids:
        raise InvalidInput(
            f"task {other.id[:8]} is {other.status}, not queued; move relative to a queued task"
        )
    index = ids.index(other.id)
    return index if before is not None else index + 1


def _within_allowance(tx: Tx, task: Task, allowance: int) -> None:
    """Refuse a bump of `task` that would start it over the limit when its user already
    has `allowance` runs over it: running over-limit, or bumped and not started yet.
    Counted under the write lock a claim takes, so two bumps cannot both pass."""
    running = [t for r in tx.rows("tasks_running") if (t := task_from_row(r)).holds_slot]
    bumped = [task_from_row(r) for r in tx.rows("tasks_start_now") if r["id"] != task.id]
    limits = read_settings(tx).limits
    full = policy.kept_out(limits, [*running, *bumped], task)
    if full is None:
        return
    over = sum(1 for t in bumped if t.user == task.user)
    for other in running:
        if other.user == task.user and other.current_attempt is not None:
            row = tx.one("attempt_get", id=other.current_attempt)
            over += row is not None and attempt_from_row(row).over_limit
    if over >= allowance:
        raise AccessDenied(
            f"start now: task {task.id[:8]} would start over the limit ({full}, counting "
            f"the tasks started now), and users may have {allowance} run(s) over it at once "
            f"(users.start_now: {allowance}; user {task.user!r} has {over}): an admin may "
            "start it now, or boost it to start next within the limits",
            task_id=task.id,
        )
