"""Dependency rules: checking new edges, and a task's end or reset (a new attempt) carried
to the tasks that depend on it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slotline.errors import DependencyCycle, InvalidTransition, NotFound, UnknownDependency
from slotline.models import BAD_ENDS, Status, Task
from slotline.store import dedup
from slotline.store.events import change
from slotline.store.queries import Tx
from slotline.store.tasks import load, next_rank, resolve
from slotline.transitions import check_transition


def resolve_dependencies(tx: Tx, refs: list[str]) -> list[Task]:
    """The tasks named by `refs`, each once; an unknown id creates nothing."""
    found: dict[str, Task] = {}
    for ref in refs:
        try:
            task = resolve(tx, ref)
        except NotFound:
            raise UnknownDependency(f"unknown dependency {ref!r}: no such task") from None
        found.setdefault(task.id, task)
    return list(found.values())


def check_no_cycle(tx: Tx, task_id: str, dep_id: str) -> None:
    """Refuse an edge task→dep if dep already depends on task, at any distance."""
    seen: set[str] = set()
    stack = [dep_id]
    while stack:
        current = stack.pop()
        if current == task_id:
            raise DependencyCycle(
                f"task {task_id[:8]} cannot depend on {dep_id[:8]}: that would close a cycle"
            )
        if current in seen:
            continue
        seen.add(current)
        stack.extend(r["dep_id"] for r in tx.rows("deps_of", task_id=current))


def initial_status(deps: list[Task], hold: bool) -> tuple[Status, str | None]:
    """Where a new task starts, given its dependencies."""
    bad = next((d for d in deps if d.status in BAD_ENDS), None)
    if bad is not None:
        return Status.BLOCKED, f"dependency {bad.id[:8]} {bad.status}"
    if any(d.status is not Status.SUCCEEDED for d in deps):
        return Status.WAITING, None
    return (Status.HELD if hold else Status.QUEUED), None


def _dependents(tx: Tx, task_id: str) -> list[Task]:
    return [load(tx, r["task_id"]) for r in tx.rows("dependents_of", dep_id=task_id)]


def _deps(tx: Tx, task_id: str) -> list[Task]:
    return [load(tx, r["dep_id"]) for r in tx.rows("deps_of", task_id=task_id)]


def propagate_end(tx: Tx, task_id: str, status: Status, now: float) -> None:
    """After `task_id` ended: queue dependents whose dependencies all succeeded, or
    block the waiting ones (and theirs, transitively) if it ended badly."""
    if status is Status.SUCCEEDED:
        for dependent in _dependents(tx, task_id):
            if dependent.status is not Status.WAITING:
                continue
            if all(d.status is Status.SUCCEEDED for d in _deps(tx, dependent.id)):
                verb = "unblock_held" if dependent.hold_when_ready else "unblock"
                to = check_transition(verb, dependent.id, dependent.status)
                tx.run(
                    "task_enqueue",
                    id=dependent.id,
                    status=to.value,
                    status_reason=None,
                    rank=next_rank(tx),
                    now=now,
                )
                change(tx, dependent, "ready", to, now, dependency=task_id)
        return
    stack = [(task_id, status)]
    while stack:
        cause, cause_status = stack.pop()
        for dependent in _dependents(tx, cause):
            if dependent.status is not Status.WAITING:
                continue
            check_transition("block", dependent.id, dependent.status)
            reason = f"dependency {cause[:8]} {cause_status}"
            tx.run(
                "task_set_status",
                id=dependent.id,
                status=Status.BLOCKED.value,
                status_reason=reason,
            )
            change(tx, dependent, "blocked", Status.BLOCKED, now, reason=reason, dependency=cause)
            stack.append((dependent.id, Status.BLOCKED))


def reset_status(tx: Tx, task: Task) -> tuple[Status, str | None]:
    """Where a restarted task goes: queued if its dependencies succeeded, blocked if one
    ended badly, else waiting."""
    deps = _deps(tx, task.id)
    bad = next((d for d in deps if d.status in BAD_ENDS), None)
    if bad is not None:
        return Status.BLOCKED, f"dependency {bad.id[:8]} {bad.status}"
    if all(d.status is Status.SUCCEEDED for d in deps):
        return Status.QUEUED, None
    return Status.WAITING, None


def unblock_dependents(tx: Tx, task_id: str, now: float) -> None:
    """After a restart: dependents blocked by this task wait again, transitively."""
    stack = [task_id]
    while stack:
        cause = stack.pop()
        for dependent in _dependents(tx, cause):
            if dependent.status is not Status.BLOCKED:
                continue
            others_bad = any(d.status in BAD_ENDS for d in _deps(tx, dependent.id) if d.id != cause)
            if others_bad:
                continue
            check_transition("reblock", dependent.id, dependent.status)
            tx.run(
                "task_set_status", id=dependent.id, status=Status.WAITING.value, status_reason=None
            )
            change(tx, dependent, "unblocked", Status.WAITING, now, dependency=cause)
            stack.append(dependent.id)


def end_task(
    tx: Tx,
    task: Task,
    to: Status,
    kind: str,
    now: float,
    *,
    status_reason: str | None = None,
    exit_code: int | None = None,
    failure_reason: str | None = None,
    event: Mapping[str, Any] | None = None,
    ended: float | None = None,
) -> None:
    """End `task` as `to` (the caller has checked the transition), log it as `kind` with
    the data `event`, and carry the end to its dependents. Its `finished_at` is `ended`
    (when its process ended, if earlier than the change), else `now`."""
    tx.run(
        "task_end",
        id=task.id,
        status=to.value,
        status_reason=status_reason,
        now=now if ended is None else ended,
        exit_code=exit_code,
        failure_reason=failure_reason,
    )
    change(tx, task, kind, to, now, **(event or {}))
    propagate_end(tx, task.id, to, now)


def reset_task(tx: Tx, task: Task, now: float, refuse_blocked: bool = False) -> None:
    """Put a task back in line for a new attempt, at the tail of its band.

    If a dependency has ended badly, a restart asked for now is refused; a forced
    restart whose run has just ended leaves the task blocked instead (its run is over
    either way, and its slot must free).
    """
    status, reason = reset_status(tx, task)
    if status is Status.BLOCKED and refuse_blocked:
        raise InvalidTransition(
            f"cannot restart task {task.id[:8]}: it is {task.status} and its {reason}; "
            "restart that one first",
            task_id=task.id,
            status=task.status,
        )
    dedup.check_restart(tx, task)
    tx.run(
        "task_reset",
        id=task.id,
        status=status.value,
        status_reason=reason,
        rank=next_rank(tx),
        queued_at=now if status is Status.QUEUED else None,
        now=now,
    )
    change(tx, task, "restarted", status, now)
    if status is Status.BLOCKED:
        propagate_end(tx, task.id, status, now)
    else:
        unblock_dependents(tx, task.id, now)
