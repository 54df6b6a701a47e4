"""Request and response bodies of the HTTP API, as they appear in the OpenAPI document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from slotline.bounds import MAX_INT
from slotline.models import Kind, Status, Task
from slotline.server.limit_schemas import BackoffOut, BudgetStateOut, RateStateOut

PriorityName = Literal["urgent", "high", "normal", "low"]
# The largest integer any API number may hold: SQLite stores 64-bit integers.
MAX_SEQ = MAX_INT


class ErrorOut(BaseModel):
    """Every error: what happened and what to do, and the kind of error."""

    detail: str
    type: str
    status: str | None = None
    limit: str | None = None
    max: int | None = None
    retry_after: int | None = Field(
        None, description="429: seconds until room is expected (also the Retry-After header)"
    )
    files: list[str] | None = Field(None, description="409 MergeConflict: the conflicting files")


class DiffStatOut(BaseModel):
    files: int
    insertions: int
    deletions: int


class MergedOut(BaseModel):
    into: str
    commit: str
    at: str
    squash: bool


class WorktreeOut(BaseModel):
    """An attempt's git worktree (tasks with `isolation: worktree`)."""

    path: str
    branch: str
    base_commit: str
    state: Literal["active", "kept", "removed"]
    diff: DiffStatOut | None = Field(
        None, description="Changes against base_commit, committed and not; once the run ended"
    )
    merged: MergedOut | None = Field(None, description="Set once `merge` landed the branch")


class IsolationOut(BaseModel):
    kind: Literal["worktree"]
    base: str | None
    base_commit: str | None
    keep: Literal["on_failure", "always", "until_merged", "never"]


class AttemptOut(BaseModel):
    id: str
    number: int
    node_id: str | None
    pid: int | None
    started_at: str | None
    finished_at: str | None
    exit_code: int | None
    outcome: str | None
    reason: str | None
    over_limit: bool
    log_path: str | None
    cpu_percent: float | None
    rss_bytes: int | None
    peak_cpu_percent: float | None
    peak_rss_bytes: int | None
    worktree: WorktreeOut | None = None
    # What the run spent (its agent type's `usage` rules) and its agent's session id;
    # resumable: its next attempt continues that session; resumed_from: the attempt
    # ({task_id, attempt}) whose session this run continued.
    usage: dict[str, float | int | dict[str, float | int] | None] | None = None
    session_id: str | None = None
    resumable: bool = False
    resumed_from: dict[str, str | int] | None = None
    denied_tools: list[str] = Field(
        default_factory=list,
        description="The tool uses its agent was refused (its permission mode), one each",
    )


class WaitingReasonOut(BaseModel):
    """Why a task in line does not start now (see docs/http.md)."""

    kind: str = Field(
        description="slots, limit, rate, budget, backoff, held, dependency, start_time, "
        "paused, guard, no_node or unserved"
    )
    text: str = Field(description="The reason in a sentence")
    until: str | None = Field(None, description="When it frees, if known (ISO 8601 UTC)")


class TaskOut(BaseModel):
    """`Task.to_dict()` plus a few fields a remote client needs to act on the task."""

    id: str
    kind: Kind
    title: str
    command: list[str]
    callable: str | None
    agent: str | None
    workspace: str | None
    user: str | None
    labels: dict[str, str]
    status: Status
    status_reason: str | None
    budget_until: str | None = Field(
        None,
        description="Queued and held by a reached budget: when every budget holding it has "
        "room again (ISO 8601 UTC); its status_reason says which",
    )
    priority: PriorityName
    boosted: bool
    position: int | None
    eta_start: str | None = Field(None, description="Estimated start (ISO 8601 UTC)")
    eta_finish: str | None = Field(None, description="Estimated finish (ISO 8601 UTC)")
    eta_basis: str | None = Field(None, description="Where the run times came from")
    eta_unavailable: str | None = Field(
        None,
        description="Why a task in line has no estimate (or no finish), when one could not be made",
    )
    eta_overdue: bool = Field(
        False, description="Running longer than its expected run time: its end is not known"
    )
    waiting_reason: WaitingReasonOut | None = Field(
        None, description="Why a task in line does not start now; null: it would"
    )
    next_up: bool = Field(False, description="NEXT UP: the task expected to start first")
    depends_on: list[str]
    parent_id: str | None
    max_attempts: int
    timeout: float | None
    queue_ttl: float | None
    memory_mb: int | None
    expected_duration: float | None
    not_before: str | None
    key: str | None = Field(None, description="Idempotency key")
    run_at: str | None = Field(None, description="Start time asked for (ISO 8601 UTC)")
    schedule: str | None = Field(None, description="The schedule that submitted it")
    created_at: str | None
    queued_at: str | None
    started_at: str | None
    finished_at: str | None
    exit_code: int | None
    failure_reason: str | None
    result: Any = Field(
        None, description="What a succeeded function task returned (JSON); single-task reads"
    )
    repo: str | None = Field(None, description="The git repository the task works on")
    isolation: IsolationOut | None = None
    stalled_at: str | None = Field(
        None, description="Since when its run printed nothing or its waiting pattern"
    )
    interactive: bool = Field(False, description="It runs in a terminal people attach to")
    first_input: str | None = Field(None, description="Typed into its terminal as it starts")
    needs_input_at: str | None = Field(
        None, description="Since when its terminal has been quiet, waiting for input"
    )
    slot_released: str | None = Field(
        None, description="Since when it has given its slot back while it needs input"
    )
    attempts: list[AttemptOut]
    current_attempt: str | None
    start_now: bool
    stop_requested: str | None
    depth: int
    backoff: float


def task_json(task: Task) -> dict[str, Any]:
    """The JSON of a task as the API returns it."""
    return {
        **task.to_dict(),
        "current_attempt": task.current_attempt,
        "start_now": task.start_now,
        "stop_requested": None if task.kill_request is None else str(task.kill_request),
        "depth": task.depth,
        "backoff": task.backoff,
    }


class SubmittedOut(TaskOut):
    """A submitted task; `deduplicated` when its key named a task that already existed."""

    deduplicated: bool = False


class MovedOut(TaskOut):
    """A moved task, and the band it had before: a move takes the band (priority and
    boost) of its new neighbours, so a client can say when the move changed it."""

    priority_before: PriorityName = Field(description="Its priority before the move")
    boosted_before: bool = Field(description="Whether it was boosted before the move")


class TaskList(BaseModel):
    tasks: list[TaskOut]
    next_after: str | None
    total: int | None
    limit: int
    offset: int


class QueueStatusOut(BaseModel):
    active: int
    max_concurrent: int
    slots_available: int
    at_capacity: bool
    capacity: Literal["no_slots", "over_limit", "full"] | None = Field(
        description="The state of capacity, one at a time: no_slots (max_concurrent is 0), "
        "over_limit (a started-now task runs past it), full (every slot taken); "
        "null: a slot is free"
    )
    paused: bool
    admission_hold: str | None
    over_limit: bool
    next_up: str | None
    queued_total: int = Field(
        description="How many are queued in all, the caller's or not (`queued` may be a head)"
    )
    running: list[TaskOut]
    queued: list[TaskOut]
    mine: list[TaskOut] | None = Field(
        None,
        description="With ?mine=true: the caller's tasks not yet ended (a task token's "
        "subtree, a user token's own tasks, or the subtree of ?root=ID)",
    )
    rates: list[RateStateOut] = Field(default_factory=list)
    budgets: list[BudgetStateOut] = Field(default_factory=list)
    backoff: list[BackoffOut] = Field(default_factory=list)


class StatsOut(BaseModel):
    counts: dict[str, int]
    total: int
    active: int
    max_concurrent: int
    slots_available: int
    queue_depth: int
    paused: bool
    running_by_agent: dict[str, int]
    oldest_queued_at: str | None
    last_seq: int
    # {"total": {…}, "agent": […], "user": […], "workspace": […], "day": […]}, each
    # {key, runs, cost_usd, input_tokens, output_tokens} (docs/http.md).
    spend: dict[str, Any]


class EventOut(BaseModel):
    seq: int
    at: str | None
    kind: str
    task_id: str | None
    data: dict[str, Any]


class EventList(BaseModel):
    events: list[EventOut]
    last_seq: int


class ClearedOut(BaseModel):
    cancelled: int


class OkOut(BaseModel):
    ok: bool = True
    paused: bool | None = None
