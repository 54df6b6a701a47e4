"""The steering steps: one change of one task inside a transaction, with its event,
shared by the steering verbs (`steering.py`), the bulk verbs (`bulk.py`) and schedules."""

from __future__ import annotations

from slotline.models import Priority, Status, Task
from slotline.stops import CANCEL, RESTART, StopKind, StopRequest
from slotline.store import deps
from slotline.store.events import change, emit
from slotline.store.queries import Tx
from slotline.transitions import check_transition


def cancel_task(tx: Tx, task: Task, now: float) -> None:
    check_transition("cancel", task.id, task.status)
    if task.status is Status.RUNNING:
        request_stop(tx, task, CANCEL)
        emit(tx, "cancel_requested", task.id, now, attempt=task.current_attempt)
        return
    deps.end_task(tx, task, Status.CANCELLED, "cancelled", now, status_reason="cancelled")


def terminate_task(tx: Tx, task: Task, now: float, reason: str) -> None:
    reason = reason.strip() or "by request"
    check_transition("terminate", task.id, task.status)
    request_stop(tx, task, StopRequest.terminate(reason[:500]))
    emit(tx, "terminate_requested", task.id, now, attempt=task.current_attempt, reason=reason)


def set_priority_of(tx: Tx, task: Task, now: float, priority: Priority, reason: str | None) -> None:
    check_transition("priority", task.id, task.status)
    tx.run("task_place", id=task.id, rank=task.rank, boosted=task.boosted, priority=int(priority))
    data = {"from": task.priority.label, "to_priority": priority.label}
    if reason and reason.strip():
        data["reason"] = reason.strip()[:500]
    emit(tx, "priority", task.id, now, **data)


def restart_task(tx: Tx, task: Task, now: float, force: bool) -> None:
    if task.status is Status.RUNNING and force:
        check_transition("restart_running", task.id, task.status)
        request_stop(tx, task, RESTART)
        emit(tx, "restart_requested", task.id, now, attempt=task.current_attempt)
    else:
        check_transition("restart", task.id, task.status)
        deps.reset_task(tx, task, now, refuse_blocked=True)


def hold_or_release(tx: Tx, task: Task, now: float, verb: str, kind: str) -> None:
    to = check_transition(verb, task.id, task.status)
    tx.run("task_set_status", id=task.id, status=to.value, status_reason=None)
    if verb == "hold" and task.start_now:
        tx.run("task_cancel_start_now", id=task.id)
    change(tx, task, kind, to, now)


def request_stop(tx: Tx, task: Task, stop: StopRequest) -> None:
    """Ask the node running `task` to stop it; the run's end then applies `stop.verb`."""
    restart = stop.kind is StopKind.RESTART
    tx.run("task_kill_request", id=task.id, kill_request=str(stop), restart_requested=restart)
