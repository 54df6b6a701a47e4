"""Request bodies of the HTTP API, as they appear in the OpenAPI document (the responses
are in `schemas.py`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from slotline.bounds import ORDINAL
from slotline.models import Kind
from slotline.runner.terminal_input import MAX_INPUT
from slotline.server.fields import PriorityIn, TaskId
from slotline.server.flags import Flag

PRIORITY_HELP = "urgent, high, normal or low; P0..P3 and medium also work; or 0..3"


class SubmitBody(BaseModel):
    """A task to submit: the fields of `TaskSpec`, plus `prompt` for a configured agent type.

    With `agent` naming an agent type of slotline.yaml and no `command`, the config's
    command template is filled with `prompt` (and workspace, title, user, agent).

    Types are strict: `"3"` is not a number and `"yes"` not a boolean. The values are
    then checked as `TaskSpec` checks them on every surface (bounds, NUL bytes, paths).
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    command: list[str] | None = None
    callable: str | None = None
    args: dict[str, Any] | None = None
    kind: Kind | None = Field(default=None, strict=False)  # an enum from a JSON string
    title: str | None = None
    agent: str | None = None
    prompt: str | None = Field(default=None, max_length=256 * 1024)
    workspace: str | None = None
    user: str | None = None
    labels: dict[str, str] | None = None
    env: dict[str, str] | None = None
    priority: PriorityIn | None = Field(default=None, description=PRIORITY_HELP)
    depends_on: list[TaskId] | None = None
    parent_id: TaskId | None = None
    max_attempts: int | None = None
    backoff: float | None = None
    timeout: float | None = None
    queue_ttl: float | None = None
    memory_mb: int | None = None
    expected_duration: float | None = None
    hold: bool | None = None
    key: str | None = Field(default=None, description="Idempotency key")
    dedup_window: float | None = Field(
        default=None,
        description="With key: also return a task of that key finished this "
        "many seconds ago or less",
    )
    run_at: str | float | None = Field(
        default=None,
        description="Start no earlier than this: epoch seconds, or ISO 8601 with an offset "
        "(Z or +01:00; a time without one is refused)",
    )
    delay: float | None = Field(
        default=None, description="Start no earlier than this many seconds from now"
    )
    isolation: Literal["worktree"] | None = None
    repo: str | None = None
    base: str | None = None
    base_commit: str | None = None
    keep: Literal["on_failure", "always", "until_merged", "never"] | None = None
    interactive: bool | None = Field(
        default=None, description="Run the command in a terminal people attach to"
    )
    first_input: str | None = Field(
        default=None, description="With interactive: typed into its terminal as it starts"
    )


class BatchBody(BaseModel):
    """Several tasks, created together or not at all."""

    model_config = ConfigDict(extra="forbid")

    tasks: list[SubmitBody] = Field(min_length=1, max_length=1000)


class CancelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cascade: Flag = False


class TerminateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="by request", max_length=500)
    # Its next attempt (a restart) continues the agent's session (`resume`).
    resumable: Flag = False


class InputBody(BaseModel):
    """A line typed into an interactive run's terminal."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=MAX_INPUT, description="What to type, as it is (no key names)")
    enter: Flag = Field(default=True, description="Press Enter after it")


class FollowupBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str = Field(min_length=1, max_length=100_000)


class MoveBody(BaseModel):
    """Exactly one of: `to` (a 1-based position), `before` or `after` (a task id)."""

    model_config = ConfigDict(extra="forbid")

    to: Annotated[int, ORDINAL] | None = None
    before: TaskId | None = None
    after: TaskId | None = None


class PriorityBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    priority: PriorityIn = Field(description=PRIORITY_HELP)
    reason: str | None = Field(default=None, max_length=500, description="Kept in the event")


class RestartBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    force: Flag = False
