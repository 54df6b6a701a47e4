"""REST routes on recurring schedules: list, add (or replace), show, pause, resume, remove.

Reading is for every token (a user token sees the schedules whose task is its own);
changing is for admins: a schedule submits tasks on its own, long after the request.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from slotline.bounds import Spelled
from slotline.errors import NotFound
from slotline.scheduler.cron import MAX_CRON, NAME_PATTERN, Schedule, check_name
from slotline.server.auth import Principal
from slotline.server.bodies import SubmitBody
from slotline.server.context import Admin, Reader, State
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.flags import Flag
from slotline.server.submission import build_spec

router = APIRouter(prefix="/api/schedules", tags=["schedules"], responses=ERROR_RESPONSES)


class ScheduleBody(BaseModel):
    """A recurring schedule: `task` is submitted at each tick of `cron` (in `tz`)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Spelled(NAME_PATTERN, check_name)] = Field(
        description="Unique name: letters, digits, _ . : @ + -"
    )
    cron: str = Field(
        min_length=1,
        max_length=MAX_CRON,
        description='5 fields ("0 3 * * *": 03:00 every day), or 6 with seconds first',
    )
    tz: str = Field(default="UTC", max_length=64, description="Time zone of the ticks")
    overlap: Literal["skip", "queue", "replace"] = Field(
        default="skip",
        description="When the previous run has not ended: skip the tick, queue another "
        "run, or cancel it and submit anew",
    )
    paused: Flag = False
    replace: Flag = Field(default=False, description="Change the schedule of that name")
    task: SubmitBody


class ScheduleOut(BaseModel):
    name: str
    cron: str
    tz: str
    overlap: str
    task: dict[str, Any]
    paused: bool
    origin: str = Field(description="config (slotline.yaml owns it) or api")
    next_at: str = Field(description="The next tick (ISO 8601 UTC); none while paused")
    last_at: str | None
    last_task_id: str | None
    live: list[str] = Field(description="Its tasks that have not ended")
    created_at: str | None
    updated_at: str | None


class ScheduleList(BaseModel):
    schedules: list[ScheduleOut]


def _visible(who: Principal, schedule: Schedule) -> bool:
    return who.sees_all or schedule.spec.get("user") == who.name


@router.get("", response_model=ScheduleList)
async def list_schedules(state: State, who: Reader) -> dict[str, Any]:
    """Every schedule, by name, with its next tick and its tasks that have not ended."""
    found = await state.call(state.store.schedules)
    return {"schedules": [s.to_dict() for s in found if _visible(who, s)]}


@router.post("", status_code=201, response_model=ScheduleOut)
async def add_schedule(state: State, who: Admin, body: ScheduleBody) -> dict[str, Any]:
    """Add a schedule (or change one, with `replace`). The task is checked as a submit
    checks it; an agent type with a prompt is filled in now."""
    spec = build_spec(body.task, state.config, who, state.raw_commands_admin_only)
    data = spec.model_dump(mode="json", exclude_defaults=True)
    schedule = await state.call(
        state.store.add_schedule,
        body.name,
        body.cron,
        data,
        tz=body.tz,
        overlap=body.overlap,
        paused=body.paused,
        replace_existing=body.replace,
    )
    return schedule.to_dict()


@router.get("/{name}", response_model=ScheduleOut)
async def get_schedule(state: State, who: Reader, name: str) -> dict[str, Any]:
    schedule = await state.call(state.store.schedule, name)
    if not _visible(who, schedule):
        raise NotFound(f"no schedule named {name!r} (see `slotline schedule ls`)")
    return schedule.to_dict()


@router.post("/{name}/pause", response_model=ScheduleOut)
async def pause_schedule(state: State, who: Admin, name: str) -> dict[str, Any]:
    """Stop submitting at its ticks; a task it submitted goes on."""
    return (await state.call(state.store.pause_schedule, name)).to_dict()


@router.post("/{name}/resume", response_model=ScheduleOut)
async def resume_schedule(state: State, who: Admin, name: str) -> dict[str, Any]:
    """Submit again from its next tick after now (ticks missed while paused are not)."""
    return (await state.call(state.store.resume_schedule, name)).to_dict()


@router.delete("/{name}", response_model=ScheduleOut)
async def remove_schedule(state: State, who: Admin, name: str) -> dict[str, Any]:
    """Remove a schedule; the tasks it submitted stay as they are. Returns it as it was."""
    return (await state.call(state.store.remove_schedule, name)).to_dict()
