"""What the dashboard reads besides the task routes: one page of the line with the
capacity header, who the caller is, and the charts' history."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import psutil
from fastapi import APIRouter, Depends, Query

from slotline import limits, stats
from slotline.bounds import OFFSET, Range
from slotline.clock import iso
from slotline.models import Task
from slotline.server.auth import Principal
from slotline.server.context import Reader, State
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.filters import filter_query
from slotline.server.queue import status_json
from slotline.server.schemas import task_json
from slotline.server.visibility import TOTALS_WITHHELD, sees_totals
from slotline.store import Settings, Store
from slotline.taskfilter import TaskFilter

router = APIRouter(prefix="/api", tags=["dashboard"], responses=ERROR_RESPONSES)

WINDOWS = {"hour": 3600.0, "day": 86_400.0}


def usage_for(who: Principal, settings: Settings, running: list[Task]) -> list[dict[str, Any]]:
    """Limit usage as `who` may see it: a user (a task token) sees the values of its own
    runs, and the runs of others only as one `(others)` count per limit."""
    usage = limits.usage(settings.per_key, running)
    if who.sees_all:
        return usage
    own = limits.usage(settings.per_key, [t for t in running if who.sees(t)])
    for item, mine in zip(usage, own, strict=True):
        hidden = sum(item["used"].values()) - sum(mine["used"].values())
        item["used"] = {**mine["used"], **({"(others)": hidden} if hidden else {})}
    return usage


def machine() -> dict[str, float]:
    """This machine's CPU (since the last call) and memory use, in percent."""
    return {
        "cpu_percent": psutil.cpu_percent(interval=None),
        "memory_percent": psutil.virtual_memory().percent,
    }


def _line(
    store: Store, who: Principal, wanted: TaskFilter, offset: int, limit: int
) -> dict[str, Any]:
    owner, root = who.scope
    line = store.line(offset, limit, None if wanted.empty else wanted, owner, root)
    data = status_json(line.status, who)
    # The page stands for the line here: `queued_total` counts what the caller sees and
    # the filter keeps; `next_up` is shown when it is among those.
    visible = who.sees_all or any(t.id == line.next_up for t in line.status.queued)
    data.update(
        next_up=line.next_up if visible else None,
        queued_total=line.queued_total,
        offset=offset,
        limit=limit,
        parked=[task_json(t) for t in line.parked],
        parked_total=line.parked_total,
        limits=usage_for(who, line.settings, line.status.running),
        machine=machine(),
        last_seq=line.last_seq,
        now=iso(line.now),
    )
    return data


@router.get("/line")
async def line(
    state: State,
    who: Reader,
    wanted: Annotated[TaskFilter, Depends(filter_query)],
    offset: Annotated[int, Query(), OFFSET] = 0,
    limit: Annotated[int, Query(), Range(1, 500, whole=True)] = 100,
) -> dict[str, Any]:
    """The capacity header, the running tasks and one page of the line in queue order
    (positions are in the whole line, also when filtered; `status` is ignored here),
    with the held and waiting tasks below it, per-key limit usage, the machine's CPU and
    memory, and the last event seq (resume the event stream from there)."""
    wanted = wanted.model_copy(update={"status": []})
    return await state.call(_line, state.store, who, wanted, offset, limit)


@router.get("/whoami")
async def whoami(who: Reader) -> dict[str, Any]:
    """The caller's token name and role, and what it may do."""
    return {
        "name": who.name,
        "role": who.role,
        "can_write": who.can_write,
        "is_admin": who.is_admin,
    }


def _charts(store: Store, who: Principal, window: float, totals: bool) -> dict[str, Any]:
    now = store.clock()
    since = now - window
    ended = [t for t in store.finished_since(since) if who.sees(t)]
    return {
        "now": now,
        "since": since,
        "samples": [s.to_dict() for s in store.samples(since)] if totals else [],
        "samples_withheld": None if totals else TOTALS_WITHHELD,
        "agents": [a.to_dict() for a in stats.compute(ended, now).agents],
    }


@router.get("/charts")
async def charts(
    state: State, who: Reader, window: Literal["hour", "day"] = "hour"
) -> dict[str, Any]:
    """The history the charts draw, on the store's clock (epoch seconds): samples of
    queue depth, running and tasks ended per interval (written by the nodes, kept a
    day), and wait and run time p50/p95 per agent type of the tasks ended in the window.
    The samples count every user's tasks: a user (a task token) gets none, and
    `samples_withheld` says why, unless slotline.yaml shares the totals
    (`share_totals: true`); the timings cover the tasks the caller sees."""
    totals = sees_totals(state, who)
    return await state.call(_charts, state.store, who, WINDOWS[window], totals)
