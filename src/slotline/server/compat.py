"""The Hephaestus queue routes, same paths and JSON shapes, so existing tools keep working.

    GET  /api/queue_status        capacity and the line
    POST /api/bump_task_priority  {task_id}            start now, over the limit
    POST /api/cancel_queued_task  {task_id}            cancel a task that has not started
    POST /api/restart_task        {task_id}            queue an ended task again
    POST /api/terminate_agent     {agent_id, reason}   stop a run (agent id = attempt id)

Errors keep slotline's codes (404, 409 naming the state, 422) with a `detail` message, as
FastAPI-based Hephaestus clients read it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from slotline.clock import iso
from slotline.errors import InvalidTransition
from slotline.line import next_up
from slotline.models import PENDING, Priority, Status, Task
from slotline.server.auth import Principal
from slotline.server.context import Reader, ServerState, State, Writer
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.fields import TaskId
from slotline.server.routes import start_now_allowance
from slotline.server.schemas import WaitingReasonOut
from slotline.store.readback import read_back

router = APIRouter(prefix="/api", tags=["hephaestus compatibility"], responses=ERROR_RESPONSES)

# The label that carries a task's Hephaestus phase (`submit --label phase_id=…`).
PHASE_LABEL = "phase_id"
# Hephaestus has three levels; urgent shows as high and normal as medium.
PRIORITY_NAMES = {
    Priority.URGENT: "high",
    Priority.HIGH: "high",
    Priority.NORMAL: "medium",
    Priority.LOW: "low",
}


class QueuedTaskOut(BaseModel):
    task_id: str
    description: str
    priority: str
    priority_boosted: bool
    queue_position: int
    queued_at: str | None
    # Hephaestus' workflow phase: the task's `phase_id` label (null without one).
    phase_id: str | None
    # slotline's own, beside Hephaestus' fields.
    eta_start: str | None = None
    eta_finish: str | None = None
    eta_basis: str | None = None
    eta_unavailable: str | None = None
    waiting_reason: WaitingReasonOut | None = None


class QueueStatusOut(BaseModel):
    active_agents: int
    max_concurrent_agents: int
    queued_tasks_count: int
    queued_tasks: list[QueuedTaskOut]
    slots_available: int
    at_capacity: bool
    # slotline's own: the task expected to start first (null: none is, or not yours).
    next_up: str | None = None


class TaskIdBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    task_id: TaskId


class TerminateBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    agent_id: str = Field(min_length=1, max_length=128)
    reason: str = Field(default="Manual termination", max_length=500)


class ResultOut(BaseModel):
    success: bool
    message: str


class BumpOut(ResultOut):
    agent_id: str | None


class RestartOut(ResultOut):
    status: str
    agent_id: str | None = None


def _queued(task: Task) -> dict[str, Any]:
    return {
        "task_id": task.id,
        "description": task.title,
        "priority": PRIORITY_NAMES[task.priority],
        "priority_boosted": task.boosted,
        "queue_position": task.position or 0,
        "queued_at": iso(task.queued_at),
        "phase_id": task.labels.get(PHASE_LABEL),
        "eta_start": iso(task.eta_start),
        "eta_finish": iso(task.eta_finish),
        "eta_basis": task.eta_basis,
        "eta_unavailable": task.eta_unavailable,
        "waiting_reason": task.waiting_reason and task.waiting_reason.to_dict(),
    }


@router.get("/queue_status", response_model=QueueStatusOut)
async def queue_status(state: State, who: Reader) -> dict[str, Any]:
    """Active agents of the maximum, and the queued tasks in order with positions."""
    # Hephaestus answers with its whole queue, and its clients have no way to ask for less.
    status = await state.call(state.store.status, all=True)
    queued = [t for t in status.queued if who.sees(t)]
    first = next_up(status.queued)
    return {
        "active_agents": status.active,
        "max_concurrent_agents": status.max_concurrent,
        "queued_tasks_count": len(queued),
        "queued_tasks": [_queued(t) for t in queued],
        "slots_available": status.slots_available,
        "at_capacity": status.at_capacity,
        "next_up": first.id if first is not None and who.sees(first) else None,
    }


async def _own(state: ServerState, who: Principal, ref: str) -> Task:
    task = await state.visible_task(who, ref)
    if not who.steers(task):
        raise HTTPException(403, f"token {who.name!r} cannot change task {task.id[:8]}")
    return task


async def _started(state: ServerState, written: Task, timeout: float) -> Task:
    """The task a write changed once a node has started it, or as it is when `timeout`
    runs out."""
    watcher = state.store.watcher()
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            task = await state.call(read_back, state.store.get, written)
            left = deadline - asyncio.get_running_loop().time()
            if task.status is not Status.QUEUED or left <= 0:
                return task
            await watcher.wait(left)
    finally:
        watcher.close()


@router.post("/bump_task_priority", response_model=BumpOut)
async def bump_task_priority(state: State, who: Writer, body: TaskIdBody) -> dict[str, Any]:
    """Bump & Start: start a queued task now, even over the limit (2/2 → 3/2)."""
    task = await _own(state, who, body.task_id)
    bumped = await state.call(state.store.bump, task.id, start_now_allowance(state, who))
    task = await _started(state, bumped, state.options.compat_start_wait)
    if task.status is Status.RUNNING and task.current_attempt:
        return {
            "success": True,
            "message": f"Task {task.id[:8]} started immediately (bypassing agent limit)",
            "agent_id": task.current_attempt,
        }
    return {
        "success": True,
        "message": f"Task {task.id[:8]} will start at the next dispatch (bypassing agent limit)",
        "agent_id": None,
    }


@router.post("/cancel_queued_task", response_model=ResultOut)
async def cancel_queued_task(state: State, who: Writer, body: TaskIdBody) -> dict[str, Any]:
    """Cancel a task that has not started; the positions behind it move up."""
    task = await _own(state, who, body.task_id)
    if task.status not in (*PENDING, Status.BLOCKED):
        hint = "use /api/terminate_agent" if task.status is Status.RUNNING else "it has ended"
        raise InvalidTransition(
            f"task {task.id[:8]} is not queued (status: {task.status}); {hint}",
            task_id=task.id,
            status=task.status,
        )
    await state.call(state.store.cancel, task.id)
    return {"success": True, "message": f"Task {task.id[:8]} cancelled and removed from queue"}


@router.post("/restart_task", response_model=RestartOut, response_model_exclude_none=True)
async def restart_task(state: State, who: Writer, body: TaskIdBody) -> dict[str, Any]:
    """Restart an ended task: it starts at once if a slot is free ("assigned", with the
    new agent id), else it is queued."""
    task = await _own(state, who, body.task_id)
    restarted = await state.call(state.store.restart, task.id)
    status = await state.call(state.store.status, limit=0)
    wait = state.options.compat_start_wait if status.slots_available else 0.0
    task = await _started(state, restarted, wait)
    if task.status is Status.RUNNING and task.current_attempt:
        return {
            "success": True,
            "message": f"Task {task.id[:8]} restarted with new agent",
            "agent_id": task.current_attempt,
            "status": "assigned",
        }
    return {
        "success": True,
        "message": f"Task {task.id[:8]} restarted and added to queue",
        "status": "queued",
    }


@router.post("/terminate_agent", response_model=ResultOut)
async def terminate_agent(state: State, who: Writer, body: TerminateBody) -> dict[str, Any]:
    """Stop the run with this agent (attempt) id; its task fails and the next one starts."""
    attempt, seen = await state.visible_attempt(who, body.agent_id)
    task = await _own(state, who, seen.id)
    if task.current_attempt != attempt.id or task.status is not Status.RUNNING:
        raise InvalidTransition(
            f"agent {attempt.id[:8]} is not running (its task {task.id[:8]} is {task.status})",
            task_id=task.id,
            status=task.status,
        )
    await state.call(state.store.terminate, task.id, body.reason)
    return {"success": True, "message": f"Agent {attempt.id[:8]} terminated successfully"}
