"""External tasks: an outside agent system claims them over HTTP and reports back.

A claim gets, for each task that fits the limits now, the attempt id and its secret token.
The claimant then heartbeats (renewing the attempt's lease) and reports `succeeded` or
`failed` with that token. A report with a stale or wrong token is refused with 409; an
attempt whose lease lapses is finished as interrupted by a node, which frees its slot.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from slotline.bounds import Range
from slotline.clock import iso
from slotline.models import Kind, Task
from slotline.server.auth import Principal
from slotline.server.context import Admin, ServerState, State, Writer
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.schemas import TaskOut, task_json
from slotline.store.readback import read_back

router = APIRouter(prefix="/api/external", tags=["external runners"], responses=ERROR_RESPONSES)

DEFAULT_LEASE = 60.0
# How long a claim of an external task holds without a heartbeat.
LEASE = Range(5, 86400, unit="seconds")


class ClaimBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claimant: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_.:@/+-]{1,100}$",
        description="Who runs the tasks (default: the token's name); shown as the node",
    )
    lease: Annotated[float, LEASE] = DEFAULT_LEASE


class ClaimOut(BaseModel):
    task: TaskOut
    attempt_id: str
    token: str
    lease_expires_at: str | None


class ClaimsOut(BaseModel):
    claims: list[ClaimOut]


class HeartbeatBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=200)
    lease: Annotated[float, LEASE] = DEFAULT_LEASE


class HeartbeatOut(BaseModel):
    attempt_id: str
    lease_expires_at: str | None
    stop_requested: str | None = Field(
        description="cancel, restart or terminate:REASON when someone asked the run to stop"
    )


class SucceededBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=200)


class FailedBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str = Field(min_length=1, max_length=200)
    reason: str = Field(default="failed", min_length=1, max_length=2000)
    exit_code: Annotated[int, Range(-(2**31), 2**31 - 1, whole=True)] | None = None


@router.post("/claim", response_model=ClaimsOut)
async def claim(state: State, who: Admin, body: ClaimBody | None = None) -> dict[str, Any]:
    """Claim every queued external task that fits the limits now (in queue order)."""
    body = body or ClaimBody()
    node_id = f"external:{body.claimant or who.name}"
    result = await state.call(
        state.store.claim, node_id, kinds=frozenset({Kind.EXTERNAL.value}), lease=body.lease
    )
    claims = []
    for item in result.claims:
        # Claimed already: the attempt's token must reach the claimant whatever the read.
        task = await state.call(read_back, state.store.get, item.task)
        claims.append(
            {
                "task": task_json(task),
                "attempt_id": item.attempt.id,
                "token": item.attempt.token,
                "lease_expires_at": iso(item.attempt.lease_expires_at),
            }
        )
    return {"claims": claims}


async def _owned(state: ServerState, who: Principal, attempt_id: str) -> None:
    _, task = await state.visible_attempt(who, attempt_id)
    if not who.steers(task):
        raise HTTPException(403, f"token {who.name!r} cannot report for task {task.id[:8]}")


@router.post("/attempts/{attempt_id}/heartbeat", response_model=HeartbeatOut)
async def heartbeat(
    state: State, who: Writer, attempt_id: str, body: HeartbeatBody
) -> dict[str, Any]:
    """Renew the attempt's lease. `stop_requested` says whether to stop and report."""
    await _owned(state, who, attempt_id)
    # Renewed by the store's clock, which reaping compares leases with (the database
    # server's on PostgreSQL), not this server's.
    renewed: tuple[Task, float] = await state.call(
        state.store.renew_attempt, attempt_id, body.token, body.lease
    )
    task, lease_expires_at = renewed
    return {
        "attempt_id": attempt_id,
        "lease_expires_at": iso(lease_expires_at),
        "stop_requested": None if task.kill_request is None else str(task.kill_request),
    }


@router.post("/attempts/{attempt_id}/succeeded", response_model=TaskOut)
async def succeeded(
    state: State, who: Writer, attempt_id: str, body: SucceededBody
) -> dict[str, Any]:
    """The run ended well; the task succeeds (or ends as cancelled if that was asked)."""
    await _owned(state, who, attempt_id)
    task = await state.call(state.store.finish, attempt_id, body.token, 0, None)
    return task_json(await state.call(read_back, state.store.get, task))


@router.post("/attempts/{attempt_id}/failed", response_model=TaskOut)
async def failed(state: State, who: Writer, attempt_id: str, body: FailedBody) -> dict[str, Any]:
    """The run failed; the task is retried while attempts are left, else it fails."""
    await _owned(state, who, attempt_id)
    task = await state.call(state.store.finish, attempt_id, body.token, body.exit_code, body.reason)
    return task_json(await state.call(read_back, state.store.get, task))
