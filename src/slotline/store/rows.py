"""Turning database rows into domain values and back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from slotline.models import Attempt, Event, Kind, Priority, ResumedFrom, Status, Task, Usage
from slotline.stops import StopRequest
from slotline.worktrees.isolation import (
    DiffStat,
    Isolation,
    KeepPolicy,
    Merged,
    Worktree,
    WorktreeState,
)

_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def dumps(value: Any) -> str:
    """`value` as the store keeps JSON: compact, keys sorted."""
    if not value and isinstance(value, list | tuple | dict):
        return "{}" if isinstance(value, dict) else "[]"
    return _ENCODER.encode(value)


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _loads(text: str) -> Any:
    """`json.loads`, with the empty list and object most rows hold parsed at no cost."""
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def task_from_row(
    row: Mapping[str, Any], attempts: tuple[Attempt, ...] = (), position: int | None = None
) -> Task:
    return Task(
        id=row["id"],
        kind=Kind(row["kind"]),
        command=tuple(_loads(row["command"])),
        callable=row["callable"],
        args=_loads(row["args"]),
        title=row["title"],
        agent=row["agent"],
        workspace=row["workspace"],
        user=row["owner"],
        labels=_loads(row["labels"]),
        env=_loads(row["env"]),
        priority=Priority(row["priority"]),
        boosted=bool(row["boosted"]),
        start_now=bool(row["start_now"]),
        rank=row["rank"],
        status=Status(row["status"]),
        status_reason=row["status_reason"],
        depends_on=tuple(_loads(row["depends_on"])),
        parent_id=row["parent_id"],
        depth=row["depth"],
        max_attempts=row["max_attempts"],
        backoff=float(row["backoff"]),
        timeout=_opt_float(row["timeout"]),
        queue_ttl=_opt_float(row["queue_ttl"]),
        not_before=_opt_float(row["not_before"]),
        kill_request=StopRequest.parse(row["kill_request"]),
        restart_requested=bool(row["restart_requested"]),
        created_at=float(row["created_at"]),
        queued_at=_opt_float(row["queued_at"]),
        started_at=_opt_float(row["started_at"]),
        finished_at=_opt_float(row["finished_at"]),
        exit_code=row["exit_code"],
        failure_reason=row["failure_reason"],
        attempt_count=row["attempt_count"],
        attempt_base=row["attempt_base"],
        current_attempt=row["current_attempt"],
        memory_mb=row["memory_mb"],
        expected_duration=_opt_float(row["expected_duration"]),
        hold_when_ready=bool(row["hold_when_ready"]),
        key=row["dedup_key"],
        run_at=_opt_float(row["run_at"]),
        schedule=row["schedule"],
        repo=row["repo"],
        isolation=isolation_from_text(row["isolation"]),
        stalled_at=_opt_float(row.get("stalled_at")),
        interactive=bool(row.get("interactive")),
        first_input=row.get("first_input"),
        needs_input_at=_opt_float(row.get("needs_input_at")),
        slot_released=_opt_float(row.get("slot_released")),
        attempts=attempts,
        position=position,
    )


def attempt_from_row(row: Mapping[str, Any]) -> Attempt:
    return Attempt(
        id=row["id"],
        task_id=row["task_id"],
        number=row["number"],
        token=row["token"],
        node_id=row["node_id"],
        pid=row["pid"],
        pid_started=_opt_float(row["pid_started"]),
        started_at=float(row["started_at"]),
        finished_at=_opt_float(row["finished_at"]),
        exit_code=row["exit_code"],
        outcome=row["outcome"],
        reason=row["reason"],
        over_limit=bool(row["over_limit"]),
        lease_expires_at=_opt_float(row["lease_expires_at"]),
        log_path=row["log_path"],
        cpu_percent=_opt_float(row["cpu_percent"]),
        rss_bytes=row["rss_bytes"],
        peak_cpu_percent=_opt_float(row["peak_cpu_percent"]),
        peak_rss_bytes=row["peak_rss_bytes"],
        worktree=_worktree(row),
        usage=_usage(row),
        session_id=row["session_id"],
        resumable=bool(row["resumable"]),
        resumed_from=(
            None
            if row["resumed_task"] is None
            else ResumedFrom(row["resumed_task"], int(row["resumed_attempt"]))
        ),
        denied_tools=tuple(json.loads(row["denied_tools"] or "[]")),
    )


def _usage(row: Mapping[str, Any]) -> Usage | None:
    cost, tokens_in, tokens_out = row["cost_usd"], row["input_tokens"], row["output_tokens"]
    if cost is None and tokens_in is None and tokens_out is None:
        return None
    totals = json.loads(row["session_totals"] or "null")
    return Usage(_opt_float(cost), tokens_in, tokens_out, totals)


def isolation_to_text(isolation: Isolation | None) -> str | None:
    """A task's isolation as the store keeps it (JSON), or None."""
    if isolation is None:
        return None
    return dumps(
        {"base": isolation.base, "base_commit": isolation.base_commit, "keep": isolation.keep}
    )


def isolation_from_text(text: str | None) -> Isolation | None:
    if text is None:
        return None
    data = json.loads(text)
    return Isolation(data.get("base"), data.get("base_commit"), KeepPolicy(data["keep"]))


def _worktree(row: Mapping[str, Any]) -> Worktree | None:
    state = row["worktree_state"]
    if state is None:
        return None
    diff = None
    if row["diff_files"] is not None:
        diff = DiffStat(row["diff_files"], row["diff_insertions"], row["diff_deletions"])
    return Worktree(
        row["worktree_path"],
        row["worktree_branch"],
        row["worktree_base"],
        WorktreeState(state),
        diff,
        _merged(row),
    )


def _merged(row: Mapping[str, Any]) -> Merged | None:
    if row["merged_into"] is None:
        return None
    return Merged(
        row["merged_into"],
        row["merged_commit"],
        float(row["merged_at"]),
        bool(row["merged_squash"]),
    )


def event_from_row(row: Mapping[str, Any]) -> Event:
    return Event(
        seq=int(row["seq"]),
        at=float(row["at"]),
        kind=row["kind"],
        task_id=row["task_id"],
        data=json.loads(row["data"]),
    )
