"""REST route on hooks: the recent deliveries and failures of webhooks and command
hooks (`slotline notify log`). For admins only, like the hooks themselves: a user token
neither reads nor sets `notify` (slotline.yaml is the only place that sets it)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from slotline.bounds import Range
from slotline.server.context import Admin, State
from slotline.server.errors import ERROR_RESPONSES

router = APIRouter(prefix="/api/notify", tags=["notify"], responses=ERROR_RESPONSES)


@router.get("/log")
async def notify_log(
    state: State, _who: Admin, limit: Annotated[int, Query(), Range(1, 5000, whole=True)] = 100
) -> dict[str, Any]:
    """The last `limit` deliveries and failures, newest first: hook, event, seq, task,
    node, try, ok, HTTP status (or exit code), error and time taken. Never a secret."""
    deliveries = await state.call(state.store.notify_log, limit)
    return {"deliveries": [d.to_dict() for d in deliveries]}
