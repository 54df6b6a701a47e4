"""REST routes on the whole queue: status, stats, events, limits, pause/resume, clear,
export and the (redacted) configuration."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Annotated, Any

from fastapi import APIRouter, Query

from slotline.bounds import OFFSET, Range
from slotline.clock import iso, utcnow
from slotline.config.file import Config, redacted
from slotline.errors import InvalidInput
from slotline.limits import check_limit_key, check_limit_max
from slotline.line import STATUS_HEAD, next_up
from slotline.models import Task
from slotline.pacing.backoff import BackoffRule
from slotline.pacing.budgets import check_budget, check_period
from slotline.pacing.rates import check_rate, check_rate_key
from slotline.pacing.spend import Spend, runs_of, sum_spend
from slotline.scheduler.fairness import check_fairness
from slotline.server.auth import Principal
from slotline.server.context import Admin, Reader, ServerState, State
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.fields import TASK_ID
from slotline.server.flags import QueryFlag
from slotline.server.limit_schemas import LimitsBody, LimitsOut
from slotline.server.schemas import (
    ClearedOut,
    EventList,
    OkOut,
    QueueStatusOut,
    StatsOut,
    task_json,
)
from slotline.server.visibility import Visibility, own_entries, own_settings, sees_totals
from slotline.store import QueueStatus, Settings, SettingsChange, Store, check_setting
from slotline.taskfilter import ListQuery

router = APIRouter(prefix="/api", tags=["queue"], responses=ERROR_RESPONSES)


def status_json(status: QueueStatus, who: Principal) -> dict[str, Any]:
    """QueueStatus as JSON; a user (a task token) sees the capacity and the line's length
    but only their own tasks (its subtree), and `next_up` only when it is one of them."""
    if not who.sees_all:
        first = next_up(status.queued)
        status = replace(
            status,
            queued=[t for t in status.queued if who.sees(t)],
            running=[t for t in status.running if who.sees(t)],
            queued_total=len(status.queued) if status.queued_total is None else status.queued_total,
            next_up_hidden=first is not None and not who.sees(first),
        )
    data = status.to_dict()
    if not who.sees_all:  # why a run failed is its owner's to see
        data["backoff"] = [{**b, "reason": None} for b in data["backoff"]]
        # What another user spent, or how fast they start runs, is theirs to see.
        data["budgets"] = own_entries(who, data["budgets"])
        data["rates"] = own_entries(who, data["rates"])
    data["running"] = [task_json(t) for t in status.running]
    data["queued"] = [task_json(t) for t in status.queued]
    return data


@router.get("/status", response_model=QueueStatusOut)
async def queue_status(
    state: State,
    who: Reader,
    mine: Annotated[QueryFlag, Query(description="Also list the caller's own live tasks")] = False,
    root: Annotated[
        str | None, TASK_ID, Query(description="With mine: this task's subtree")
    ] = None,
    limit: Annotated[
        int,
        Query(description="The first LIMIT queued tasks: the head of the line"),
        Range(0, 100_000, whole=True),
    ] = STATUS_HEAD,
    all: Annotated[
        QueryFlag, Query(description="Every queued task, the whole line (LIMIT is ignored)")
    ] = False,
) -> dict[str, Any]:
    """Capacity (active of max, slots available, at capacity, paused) and the line: running
    tasks, then queued tasks in order with their positions: the head of the line, its
    first `limit`, or with `all=true` every one (which costs time in proportion to the
    line); `queued_total` counts them all, the caller's or not. `next_up` is the task
    expected to start first (null when none is, or for a user or task token when that
    task is not theirs); each task in line that does not start now says why in
    `waiting_reason`. Every task in line carries `eta_start`, `eta_finish` and
    `eta_basis`."""
    status = await state.call(state.store.status, limit=limit, all=all)
    data = status_json(status, who)
    if mine:
        data["mine"] = [task_json(t) for t in await own_tasks(state, who, root)]
    return data


async def own_tasks(state: ServerState, who: Principal, root: str | None) -> list[Task]:
    """The caller's live tasks: the subtree of `root` (a task it may see), else a task
    token's subtree, else a user token's own tasks; none for an admin or viewer without
    `root`."""
    if root is not None:
        root = (await state.visible_task(who, root)).id
    elif who.task_id is not None:
        root = who.task_id
    elif who.role != "user":
        return []
    user = who.name if who.role == "user" else None
    found = await state.call(state.store.mine, root, user)
    return [t for t in found if who.sees(t)]


# A task token's subtree is summed through its tasks, up to this many.
SUBTREE_READ = 10_000


def _stats(store: Store, who: Principal, totals: bool) -> dict[str, Any]:
    status = store.status(limit=0)  # capacity and the line's length, not the line
    running = status.running
    if totals:
        counts = store.counts()
        oldest = store.oldest_queued_at()
    else:  # the caller's own tasks; capacity and the line's length as /api/status says
        counts = _own_counts(store, who)
        running = [t for t in running if who.sees(t)]
        oldest = store.oldest_queued_at(*who.scope)
    by_agent = Counter(t.agent or "" for t in running)
    return {
        "counts": counts,
        "total": sum(counts.values()),
        "active": status.active,
        "max_concurrent": status.max_concurrent,
        "slots_available": status.slots_available,
        "queue_depth": status.queued_total,
        "paused": status.paused,
        "running_by_agent": dict(by_agent),
        "oldest_queued_at": iso(oldest),
        "last_seq": store.last_seq(),
        # Over the tasks the caller sees: other users' spend is theirs to see.
        "spend": _spend(store, who).to_dict(),
    }


def _own_counts(store: Store, who: Principal) -> dict[str, int]:
    """Tasks per status of a user's own, or of a task token's subtree."""
    if who.role == "user":
        return store.counts(who.name)
    owner, root = who.scope
    tasks = store.list_page(ListQuery(owner=owner, root=root, limit=SUBTREE_READ)).tasks
    return dict(Counter(t.status.value for t in tasks if who.sees(t)))


def _spend(store: Store, who: Principal) -> Spend:
    """What the runs the caller sees spent: a light row per run that reported any, for
    every task or a user's own; a task token's subtree through its tasks."""
    if who.role == "task":
        owner, root = who.scope
        tasks = store.list_page(ListQuery(owner=owner, root=root, limit=SUBTREE_READ)).tasks
        return sum_spend(runs_of(t for t in tasks if who.sees(t)))
    return sum_spend(store.spent_runs(None if who.sees_all else who.name))


@router.get("/stats", response_model=StatsOut)
async def stats(state: State, who: Reader) -> dict[str, Any]:
    """Tasks per status, capacity, queue depth and running tasks per agent type, and
    what the runs the caller sees spent (`spend`: cost and tokens per agent type, user,
    workspace and day). A user (a task token) gets the counts of their own tasks (its
    subtree), unless slotline.yaml shares the totals (`share_totals: true`)."""
    return await state.call(_stats, state.store, who, sees_totals(state, who))


@router.get("/events", response_model=EventList)
async def events(
    state: State,
    who: Reader,
    since: Annotated[int, Query(), OFFSET] = 0,
    limit: Annotated[int, Query(), Range(0, 1000, whole=True)] = 1000,
) -> dict[str, Any]:
    """Events after `since` (a seq), oldest first, and the last seq of the log. For a live
    feed use /api/events/ws or /api/events/stream. A user sees queue-wide events and
    those of their own tasks."""
    found = await state.call(state.store.events, since, limit) if limit else []
    if not who.sees_all:
        visible = Visibility(state, who)
        found = [shown for e in found if (shown := await visible(e)) is not None]
    last = await state.call(state.store.last_seq)
    return {"events": [e.to_dict() for e in found], "last_seq": last}


@router.post("/pause", response_model=OkOut)
async def pause(state: State, _who: Admin) -> dict[str, Any]:
    """Start nothing new until resumed; running tasks go on."""
    await state.call(state.store.pause)
    return {"ok": True, "paused": True}


@router.post("/resume", response_model=OkOut)
async def resume(state: State, _who: Admin) -> dict[str, Any]:
    """Start tasks again."""
    await state.call(state.store.resume)
    return {"ok": True, "paused": False}


@router.post("/clear", response_model=ClearedOut)
async def clear(state: State, _who: Admin) -> dict[str, Any]:
    """Cancel every task that has not started; returns how many."""
    return {"cancelled": await state.call(state.store.clear)}


@router.get("/limits", response_model=LimitsOut)
async def limits(state: State, who: Reader) -> dict[str, Any]:
    """The global limit, bounds, exempt agent types and per-key limits; a user (a task
    token) gets no limit, rate, budget or fairness weight of another user."""
    return own_settings(who, (await state.call(state.store.settings)).to_dict())


def _apply_limits(store: Store, body: LimitsBody) -> Settings:
    # Check every change before making any, so a bad one leaves the others undone too.
    for item in body.limits:
        check_limit_key(item.key)
        if item.value is not None and not item.value:
            raise InvalidInput(f"limits: {item.key}: a limit value must not be empty")
        if item.max is not None:
            check_limit_max(item.max)
    for name, value in body.changed_settings().items():
        try:
            check_setting(name, value)
        except InvalidInput as exc:
            raise InvalidInput(f"settings: {exc}") from None
    for rate in body.rates:
        if rate.max is not None:
            try:
                check_rate(rate.key, rate.value, rate.max, rate.period)
            except InvalidInput as exc:
                raise InvalidInput(f"rates: {rate.key}: {exc}") from None
        else:
            check_rate_key(rate.key)
    for budget in body.budgets:
        try:
            if budget.amount is not None:
                check_budget(
                    budget.key, budget.value, budget.amount, budget.period, budget.unit or "usd"
                )
            else:
                check_rate_key(budget.key)
                if budget.period is not None:
                    check_period(budget.period)
        except InvalidInput as exc:
            raise InvalidInput(f"budgets: {budget.key}: {exc}") from None
    if "fairness" in body.model_fields_set and body.fairness is not None:
        check_fairness(body.fairness.key, body.fairness.weights)
    for backoff in body.backoff:
        if backoff.rule is not None:
            BackoffRule.from_dict(backoff.rule)
    fair = body.fairness
    return store.apply_settings(
        SettingsChange(
            settings=body.changed_settings(),
            limits=[(item.key, item.value, item.max) for item in body.limits],
            exempt_agents=body.exempt_agents,
            rates=[(r.key, r.value, r.max, r.period) for r in body.rates],
            budgets=[(b.key, b.value, b.amount, b.period, b.unit) for b in body.budgets],
            fairness_given="fairness" in body.model_fields_set,
            fairness=None if fair is None else (fair.key, fair.weights),
            backoff=[(b.agent, b.rule) for b in body.backoff],
        )
    )


@router.post("/limits", response_model=LimitsOut)
async def update_limits(state: State, _who: Admin, body: LimitsBody) -> dict[str, Any]:
    """Change settings (`{"settings": {"max_concurrent": 4}}`), per-key limits
    (`{"limits": [{"key": "agent", "value": "claude", "max": 2}]}`, max null removes),
    the agent types outside the global pool, rates (`{"rates": [{"key": "agent", "value":
    "claude", "max": 20, "period": "1m"}]}`), budgets (`{"budgets": [{"key": "agent",
    "value": "claude", "amount": 50, "unit": "usd", "period": "1d"}]}`), fairness
    (`{"fairness": {"key": "user"}}`, null turns it off) and back-off rules
    (`{"backoff": [{"agent": "claude", "rule": {"exit_codes": [75]}}]}`). Every change is
    checked before any is made, and all are made in one transaction. A running node
    applies them at once."""
    return (await state.call(_apply_limits, state.store, body)).to_dict()


def _export(store: Store, config: Config, who: Principal) -> dict[str, Any]:
    owner, root = who.scope
    tasks = store.list_page(ListQuery(owner=owner, root=root, limit=1_000_000)).tasks
    url = redacted(config.model_copy(update={"store": store.url}))["store"]
    return {
        "exported_at": iso(utcnow()),
        "store": url if who.is_admin else None,
        "settings": own_settings(who, store.settings().to_dict()),
        "last_seq": store.last_seq(),
        "tasks": [task_json(t) for t in tasks],
    }


@router.get("/export")
async def export(state: State, who: Reader) -> dict[str, Any]:
    """Every visible task with its attempts, and the settings, as one JSON document."""
    return await state.call(_export, state.store, state.config, who)


@router.get("/config")
async def config(state: State, who: Reader) -> dict[str, Any]:
    """The effective configuration, with any password in the store URL hidden; the hooks
    (`notify`, `on_event`) for admins only, never a webhook's secret; for a user (a
    task token) nothing that names another user (`own_settings`)."""
    return own_settings(who, redacted(state.config, admin=who.is_admin))
