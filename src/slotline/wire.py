"""The API's JSON as slotline's models: what `SlotlineClient` reads off the wire."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from slotline.isolation import DiffStat, Isolation, KeepPolicy, Worktree, WorktreeState
from slotline.models import Attempt, Event, Kind, Limit, Priority, Status, Task
from slotline.scheduler.rates import RateLimit
from slotline.store import Settings
from slotline.transitions import StopRequest


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
    )


def _worktree(data: dict[str, Any] | None) -> Worktree | None:
    if data is None:
        return None
    diff = data.get("diff")
    return Worktree(
        data["path"],
        data["branch"],
        data["base_commit"],
        WorktreeState(data["state"]),
        None if diff is None else DiffStat(diff["files"], diff["insertions"], diff["deletions"]),
    )


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
        attempts=attempts,
        position=data.get("position"),
        eta_start=_epoch(data.get("eta_start")),
        eta_finish=_epoch(data.get("eta_finish")),
        eta_basis=data.get("eta_basis"),
    )


def event_from_json(data: dict[str, Any]) -> Event:
    return Event(
        seq=int(data["seq"]),
        at=_epoch(data.get("at")) or 0.0,
        kind=data["kind"],
        task_id=data.get("task_id"),
        data=dict(data.get("data", {})),
    )


def settings_from_json(data: dict[str, Any]) -> Settings:
    values = {k: v for k, v in data.items() if k not in ("limits", "rates")}
    per_key = tuple(Limit(x["key"], x.get("value"), int(x["max"])) for x in data["limits"])
    rates = tuple(
        RateLimit(x["key"], x.get("value"), int(x["max"]), float(x["period"]))
        for x in data.get("rates") or ()
    )
    return Settings(values, per_key, rates)
