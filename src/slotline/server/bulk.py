"""Bulk steering (by ids or by filter) and the emergency stop."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.config import JsonDict, JsonValue

from slotline.errors import InvalidInput
from slotline.server.auth import Principal
from slotline.server.bodies import PRIORITY_HELP
from slotline.server.context import Admin, State, Writer, hidden
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.fields import PriorityIn, TaskId
from slotline.server.flags import Flag
from slotline.store import MAX_BULK, Store
from slotline.taskfilter import ListQuery, TaskFilter

router = APIRouter(prefix="/api", tags=["bulk"], responses=ERROR_RESPONSES)


def _given(name: str, schema: JsonDict) -> JsonDict:
    return {"required": [name], "properties": {name: schema}}


# A filter that is not `empty`: one of its lists has an item, or a text is not blank.
_NON_EMPTY: list[JsonValue] = [
    *(_given(name, {"type": "array", "minItems": 1}) for name in ("status", "label")),
    *(
        _given(name, {"type": "string", "minLength": 1})
        for name in ("agent", "workspace", "user", "q")
    ),
]
_NULL: JsonDict = {"type": "null"}


class BulkBody(BaseModel):
    """A verb and the tasks it applies to: `ids` (ids or unique prefixes), or `filter`
    (every task matching it that the caller may steer)."""

    # The rules `_one_target` and `Store.bulk` check, stated in the schema: exactly one
    # of `ids` and `filter` is given (not null), the filter names a criterion, and a
    # priority comes with the verb priority only.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {
                    "oneOf": [
                        {
                            "required": ["ids"],
                            "properties": {"ids": {"type": "array"}, "filter": _NULL},
                        },
                        {
                            "required": ["filter"],
                            "properties": {
                                "filter": {"type": "object", "anyOf": _NON_EMPTY},
                                "ids": _NULL,
                            },
                        },
                    ]
                },
                {
                    "anyOf": [
                        {
                            "required": ["verb", "priority"],
                            "properties": {
                                "verb": {"const": "priority"},
                                "priority": {"not": {"type": "null"}},
                            },
                        },
                        {
                            "properties": {
                                "verb": {"not": {"const": "priority"}},
                                "priority": {"type": "null"},
                            }
                        },
                    ]
                },
            ]
        },
    )

    verb: Literal["cancel", "terminate", "priority", "hold", "release", "restart"]
    ids: list[TaskId] | None = Field(default=None, max_length=MAX_BULK)
    filter: TaskFilter | None = None
    priority: PriorityIn | None = Field(default=None, description=PRIORITY_HELP)
    reason: str | None = Field(default=None, max_length=500)
    force: Flag = False

    @model_validator(mode="after")
    def _one_target(self) -> BulkBody:
        if (self.ids is None) == (self.filter is None):
            raise ValueError("give exactly one of ids and filter")
        if self.filter is not None and self.filter.empty:
            raise ValueError("the filter must name at least one criterion (status, agent…)")
        return self


class BulkOut(BaseModel):
    verb: str
    done: list[str]
    skipped: list[dict[str, str]]


def _targets(store: Store, who: Principal, body: BulkBody) -> list[str]:
    """The full ids the body names, each one the caller may steer."""
    if body.filter is not None:
        # One more than a bulk verb takes: enough to refuse a filter that matches too many.
        query = ListQuery(body.filter, owner=who.scope[0], root=who.scope[1], limit=MAX_BULK + 1)
        tasks = store.list_page(query).tasks
        return [t.id for t in tasks if who.steers(t)]
    ids = []
    # One read for them all: a task's page (`get`: attempts, position, estimate) per id
    # made a bulk of thousands take minutes on a busy line.
    refs = body.ids or []
    for ref, task in zip(refs, store.bulk_targets(refs, who.prefix_owner), strict=True):
        if not who.sees(task):
            raise hidden(ref)
        if not who.steers(task):
            raise HTTPException(403, f"token {who.name!r} cannot change task {task.id[:8]}")
        ids.append(task.id)
    return ids


def _bulk(store: Store, who: Principal, body: BulkBody) -> dict[str, Any]:
    ids = _targets(store, who, body)
    if len(ids) > MAX_BULK:
        raise InvalidInput(f"the filter matches more than {MAX_BULK} tasks; narrow it")
    result = store.bulk(
        body.verb, ids, priority=body.priority, reason=body.reason, force=body.force
    )
    return result.to_dict()


@router.post("/tasks/bulk", response_model=BulkOut)
async def bulk(state: State, who: Writer, body: BulkBody) -> dict[str, Any]:
    """Cancel, terminate, re-prioritize, hold, release or restart many tasks, one event
    per task changed, committed 500 tasks at a time (other writers go on between two
    chunks; if the store fails midway, the chunks before stay done). Tasks the verb does
    not apply to (already ended, not running…) are listed in `skipped` with why. A user
    token reaches only its own tasks."""
    return await state.call(_bulk, state.store, who, body)


class StopBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="emergency stop", max_length=500)


class StopOut(BaseModel):
    paused: bool
    stopped: list[str]


@router.post("/emergency-stop", response_model=StopOut)
async def emergency_stop(state: State, _who: Admin, body: StopBody | None = None) -> dict[str, Any]:
    """Pause dispatch and terminate every running task (they fail with "terminated:
    REASON"); `resume` starts tasks again."""
    reason = body.reason if body else "emergency stop"
    stopped = await state.call(state.store.emergency_stop, reason)
    return {"paused": True, "stopped": stopped}
