"""The API's paths and JSON: what `SlotlineClient` sends, and reads back as slotline's models."""

from __future__ import annotations

import urllib.parse
from datetime import datetime
from typing import Any

from slotline.limits import Limit
from slotline.models import (
    Attempt,
    Event,
    Kind,
    Priority,
    ResumedFrom,
    Status,
    Task,
    Usage,
    WaitingReason,
)
from slotline.pacing.budgets import Budget
from slotline.pacing.rates import RateLimit
from slotline.spec import TaskSpec, instant
from slotline.stops import StopRequest
from slotline.store import Delivery, QueueStatus, Settings
from slotline.worktrees.isolation import (
    DiffStat,
    Isolation,
    KeepPolicy,
    Merged,
    Worktree,
    WorktreeState,
)


def task_path(ref: str, verb: str | None = None) -> str:
    """A task's URL path; the ref is escaped, so no ref (`../../pause`) reaches another route."""
    path = f"/api/tasks/{urllib.parse.quote(ref, safe='')}"
    return path if verb is None else f"{path}/{verb}"


def schedule_path(name: str, verb: str | None = None) -> str:
    """A schedule's URL path, its name escaped as a task's ref is."""
    path = f"/api/schedules/{urllib.parse.quote(name, safe='')}"
    return path if verb is None else f"{path}/{verb}"


def spec_to_json(spec: TaskSpec | dict[str, Any]) -> dict[str, Any]:
    """A task's spec as the body of a submit (or a schedule's task)."""
    if isinstance(spec, TaskSpec):
        data = spec.model_dump(mode="json", exclude_defaults=True)
        data["priority"] = spec.priority.label
        if spec.kind is not None:
            data["kind"] = spec.resolved_kind.value
        return data
    # Enum values (a Priority) go as their names, which the API takes; a start time
    # as epoch seconds, converted here by `instant`'s rule (a naive datetime is this
    # machine's local time, which the server cannot know).
    return {
        k: v.label if isinstance(v, Priority) else instant(v) if k == "run_at" else v
        for k, v in spec.items()
    }


def _epoch(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def attempt_from_json(data: dict[str, Any], task_id: str) -> Attempt:
    return Attempt(
        id=data["id"],
        task_id=task_id,
        number=data["number"],
        token="",  # never sent by the server
        node_id=data.get("node_id"),
        pid=data.get("pid"),
        pid_started=None,
        started_at=_epoch(data.get("started_at")) or 0.0,
        finished_at=_epoch(data.get("finished_at")),
        exit_code=data.get("exit_code"),
        outcome=data.get("outcome"),
        reason=data.get("reason"),
        over_limit=bool(data.get("over_limit")),
        lease_expires_at=None,
        log_path=data.get("log_path"),
        cpu_percent=data.get("cpu_percent"),
        rss_bytes=data.get("rss_bytes"),
        peak_cpu_percent=data.get("peak_cpu_percent"),
        peak_rss_bytes=data.get("peak_rss_bytes"),
        worktree=_worktree(data.get("worktree")),
        usage=_usage(data.get("usage")),
        session_id=data.get("session_id"),
        resumable=bool(data.get("resumable")),
        resumed_from=_resumed(data.get("resumed_from")),
        denied_tools=tuple(data.get("denied_tools") or ()),
    )


def _usage(data: dict[str, Any] | None) -> Usage | None:
    if data is None:
        return None
    return Usage(
        data.get("cost_usd"),
        data.get("input_tokens"),
        data.get("output_tokens"),
        data.get("session_totals"),
    )


def _resumed(data: dict[str, Any] | None) -> ResumedFrom | None:
    return None if data is None else ResumedFrom(data["task_id"], data["attempt"])


def _worktree(data: dict[str, Any] | None) -> Worktree | None:
    if data is None:
        return None
    diff, merged = data.get("diff"), data.get("merged")
    return Worktree(
        data["path"],
        data["branch"],
        data["base_commit"],
        WorktreeState(data["state"]),
        None if diff is None else DiffStat(diff["files"], diff["insertions"], diff["deletions"]),
        None if merged is None else _merged(merged),
    )


def _merged(data: dict[str, Any]) -> Merged:
    return Merged(data["into"], data["commit"], _epoch(data["at"]) or 0.0, data["squash"])


def _isolation(data: dict[str, Any] | None) -> Isolation | None:
    if data is None:
        return None
    return Isolation(data.get("base"), data.get("base_commit"), KeepPolicy(data["keep"]))


def task_from_json(data: dict[str, Any]) -> Task:
    """A Task from the API's JSON (env, args and rank are not sent: they stay empty)."""
    attempts = tuple(attempt_from_json(a, data["id"]) for a in data.get("attempts", ()))
    return Task(
        id=data["id"],
        kind=Kind(data["kind"]),
        command=tuple(data.get("command", ())),
        callable=data.get("callable"),
        args={},
        title=data["title"],
        agent=data.get("agent"),
        workspace=data.get("workspace"),
        user=data.get("user"),
        labels=dict(data.get("labels", {})),
        env={},
        priority=Priority.parse(data["priority"]),
        boosted=bool(data.get("boosted")),
        start_now=bool(data.get("start_now")),
        rank="",
        status=Status(data["status"]),
        status_reason=data.get("status_reason"),
        budget_until=_epoch(data.get("budget_until")),
        depends_on=tuple(data.get("depends_on", ())),
        parent_id=data.get("parent_id"),
        depth=int(data.get("depth", 0)),
        max_attempts=int(data.get("max_attempts", 1)),
        backoff=float(data.get("backoff", 0.0)),
        timeout=data.get("timeout"),
        queue_ttl=data.get("queue_ttl"),
        not_before=_epoch(data.get("not_before")),
        kill_request=StopRequest.parse(data.get("stop_requested")),
        restart_requested=data.get("stop_requested") == "restart",
        created_at=_epoch(data.get("created_at")) or 0.0,
        queued_at=_epoch(data.get("queued_at")),
        started_at=_epoch(data.get("started_at")),
        finished_at=_epoch(data.get("finished_at")),
        exit_code=data.get("exit_code"),
        failure_reason=data.get("failure_reason"),
        result=data.get("result"),
        attempt_count=max((a.number for a in attempts), default=0),
        attempt_base=0,
        current_attempt=data.get("current_attempt"),
        memory_mb=data.get("memory_mb"),
        expected_duration=data.get("expected_duration"),
        key=data.get("key"),
        run_at=_epoch(data.get("run_at")),
        schedule=data.get("schedule"),
        deduplicated=bool(data.get("deduplicated")),
        repo=data.get("repo"),
        isolation=_isolation(data.get("isolation")),
        stalled_at=_epoch(data.get("stalled_at")),
        interactive=bool(data.get("interactive")),
        first_input=data.get("first_input"),
        needs_input_at=_epoch(data.get("needs_input_at")),
        slot_released=_epoch(data.get("slot_released")),
        attempts=attempts,
        position=data.get("position"),
        eta_start=_epoch(data.get("eta_start")),
        eta_finish=_epoch(data.get("eta_finish")),
        eta_basis=data.get("eta_basis"),
        eta_unavailable=data.get("eta_unavailable"),
        eta_overdue=bool(data.get("eta_overdue")),
        waiting_reason=_waiting(data.get("waiting_reason")),
        next_up=bool(data.get("next_up")),
    )


def _waiting(data: dict[str, Any] | None) -> WaitingReason | None:
    if not data:
        return None
    return WaitingReason(data["kind"], data["text"], _epoch(data.get("until")))


def event_from_json(data: dict[str, Any]) -> Event:
    return Event(
        seq=int(data["seq"]),
        at=_epoch(data.get("at")) or 0.0,
        kind=data["kind"],
        task_id=data.get("task_id"),
        data=dict(data.get("data", {})),
    )


def settings_from_json(data: dict[str, Any]) -> Settings:
    values = {k: v for k, v in data.items() if k not in ("limits", "rates", "budgets")}
    per_key = tuple(
        Limit(x["key"], x.get("value"), int(x["max"]), x.get("origin", "api"))
        for x in data["limits"]
    )
    rates = tuple(
        RateLimit(
            x["key"], x.get("value"), int(x["max"]), float(x["period"]), x.get("origin", "api")
        )
        for x in data.get("rates") or ()
    )
    budgets = tuple(
        Budget(
            x["key"],
            x.get("value"),
            float(x["amount"]),
            x["unit"],
            float(x["period"]),
            x.get("origin", "api"),
        )
        for x in data.get("budgets") or ()
    )
    return Settings(values, per_key, rates, budgets)


def status_from_json(data: dict[str, Any]) -> QueueStatus:
    return QueueStatus(
        active=data["active"],
        max_concurrent=data["max_concurrent"],
        paused=data["paused"],
        over_limit=data["over_limit"],
        queued=[task_from_json(t) for t in data["queued"]],
        running=[task_from_json(t) for t in data["running"]],
        admission=data.get("admission_hold"),
        mine=None if data.get("mine") is None else [task_from_json(t) for t in data["mine"]],
        queued_total=data.get("queued_total"),
        next_up_hidden=data.get("next_up") is None and bool(data["queued"]),
        rates=list(data.get("rates") or []),
        backoff=list(data.get("backoff") or []),
        budgets=list(data.get("budgets") or []),
    )


def delivery_from_json(data: dict[str, Any]) -> Delivery:
    took = data.get("took")
    return Delivery(
        at=_epoch(data.get("at")) or 0.0,
        hook=data["hook"],
        event=data["event"],
        seq=int(data["seq"]),
        task_id=data.get("task_id"),
        node_id=data["node_id"],
        attempt=int(data["attempt"]),
        ok=bool(data["ok"]),
        status=data.get("status"),
        error=data.get("error"),
        took=None if took is None else float(took),
    )
