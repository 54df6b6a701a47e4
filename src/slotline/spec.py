"""What a caller asks for when submitting a task, validated before anything is written."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from slotline.bounds import (
    ATTEMPTS,
    MAX_LABEL_VALUE,
    MAX_LABELS,
    MEMORY_MB,
    SECONDS,
    Range,
    normalize_workspace,
)
from slotline.errors import InvalidInput
from slotline.models import Kind, Priority
from slotline.worktrees.isolation import KeepPolicy

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NAME = re.compile(r"^[A-Za-z0-9_.:@/+-]{1,128}$")
MAX_KEY = 256
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
MAX_ARGV = 4096
MAX_ARG_BYTES = 256 * 1024
MAX_EPOCH = 253402300799.0  # 9999-12-31T23:59:59Z
# The pause between a failed attempt and its retry: up to a day.
BACKOFF = Range(0, 86400, unit="seconds")


class TaskSpec(BaseModel):
    """A task to submit. Exactly one of `command` (an argv list) or `callable` is given,
    unless `kind` is external."""

    # Every number is finite (no inf or NaN reaches the store) and bounded by `bounds`.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    command: list[str] = Field(default_factory=list, max_length=MAX_ARGV)
    callable: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    kind: Kind | None = None
    title: str | None = Field(default=None, max_length=500)
    agent: str | None = None
    workspace: str | None = Field(default=None, max_length=4096)
    user: str | None = None
    labels: dict[str, str] = Field(default_factory=dict, max_length=MAX_LABELS)
    env: dict[str, str] = Field(default_factory=dict)
    priority: Priority = Priority.NORMAL
    depends_on: list[str] = Field(default_factory=list, max_length=1000)
    parent_id: str | None = None
    max_attempts: Annotated[int, ATTEMPTS] = 1
    backoff: Annotated[float, BACKOFF] = 5.0
    timeout: Annotated[float, SECONDS] | None = None
    queue_ttl: Annotated[float, SECONDS] | None = None
    memory_mb: Annotated[int, MEMORY_MB] | None = None
    expected_duration: Annotated[float, SECONDS] | None = None
    hold: bool = False
    # Idempotency, per `user` (no user: one shared scope): while a task of the same user
    # with this key has not finished, submitting returns it; with `dedup_window`
    # (seconds), so does one that finished within that window.
    key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY)
    dedup_window: Annotated[float, SECONDS] | None = None
    # A delayed task: start no earlier than `run_at` (`instant`: epoch seconds, a datetime,
    # or ISO 8601 with an offset), or `delay` seconds after the submit (the store's clock).
    run_at: float | None = None
    delay: Annotated[float, SECONDS] | None = None
    # Worktree isolation (docs/config.md): the run's cwd is a fresh git worktree of
    # `repo` (default: the workspace) at `base` (default: HEAD), pinned to `base_commit`
    # at submit. `repo` alone records the repository for `repo` limits.
    isolation: Literal["worktree"] | None = None
    repo: str | None = Field(default=None, max_length=4096)
    base: str | None = Field(default=None, max_length=256)
    base_commit: str | None = None
    keep: KeepPolicy | None = None
    # Run the command in a terminal (a tmux session of slotline's own) that people attach
    # to and type into (`slotline attach`, `send`), instead of headless with its output
    # to a log (docs/coding-agents.md, "Interactive runs").
    interactive: bool = False
    # Typed into its terminal as its run starts, then Enter (an interactive run's first
    # message, for an agent that takes none on its command line).
    first_input: str | None = Field(default=None, min_length=1, max_length=64 * 1024)

    @field_validator("priority", mode="before")
    @classmethod
    def _priority(cls, value: Any) -> Priority:
        return Priority.parse(value)

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if value and not value[0]:
            raise ValueError("the program (first argv element) must not be empty")
        if any("\x00" in arg for arg in value):
            raise ValueError("argv elements must not contain NUL bytes")
        if sum(len(arg.encode()) for arg in value) > MAX_ARG_BYTES:
            raise ValueError(f"argv is larger than {MAX_ARG_BYTES} bytes")
        return value

    @field_validator("title")
    @classmethod
    def _title(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("must not contain NUL bytes")
        return value

    @field_validator("key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value is not None and any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise ValueError("must not contain control characters")
        return value

    @field_validator("run_at", mode="before")
    @classmethod
    def _run_at(cls, value: Any) -> Any:
        return instant(value)

    @field_validator("run_at")
    @classmethod
    def _run_at_range(cls, value: float | None) -> float | None:
        if value is not None and not 0 <= value <= MAX_EPOCH:
            raise ValueError("must be a time between 1970 and 9999")
        return value

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return normalize_workspace(value)
        except InvalidInput as exc:
            raise ValueError(str(exc).removeprefix("workspace ")) from None

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return normalize_workspace(value)
        except InvalidInput as exc:
            raise ValueError(str(exc).replace("workspace", "repo")) from None

    @field_validator("base")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        if value is not None and (
            not value or value.startswith("-") or any(c.isspace() or c < " " for c in value)
        ):
            raise ValueError("must be a git ref or commit: not empty, no spaces, no '-' first")
        return value

    @field_validator("base_commit")
    @classmethod
    def _base_commit(cls, value: str | None) -> str | None:
        if value is not None and not _COMMIT.match(value):
            raise ValueError("must be a commit id (hexadecimal)")
        return value

    @field_validator("args")
    @classmethod
    def _args(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            text = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError("must be JSON, without NaN or Infinity") from None
        if "\\u0000" in text:
            raise ValueError("must not contain NUL bytes")
        return value

    @field_validator("agent", "user", "callable")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _NAME.match(value):
            raise ValueError("must be 1-128 letters, digits or . _ : @ / + -")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not _NAME.match(key):
                raise ValueError(f"label name {key!r} must be 1-128 letters, digits or . _ @ / + -")
            if len(item) > MAX_LABEL_VALUE or "\x00" in item:
                raise ValueError(
                    f"label {key}: a value is at most {MAX_LABEL_VALUE} characters, without NUL"
                )
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not _ENV_NAME.match(key):
                raise ValueError(f"environment variable name {key!r} is not valid")
            if "\x00" in item:
                raise ValueError(f"environment variable {key} contains a NUL byte")
        return value

    @model_validator(mode="after")
    def _kind(self) -> TaskSpec:
        if self.command and self.callable:
            raise ValueError("give either a command or a callable, not both")
        kind = self.kind
        if kind is None:
            kind = Kind.CALLABLE if self.callable else Kind.COMMAND
            object.__setattr__(self, "kind", kind)
        if kind is Kind.COMMAND and not self.command:
            raise ValueError("a command task needs a command (an argv list)")
        if kind is Kind.CALLABLE and not self.callable:
            raise ValueError("a callable task needs the name of a registered callable")
        if self.run_at is not None and self.delay is not None:
            raise ValueError("give run_at (a time) or delay (seconds), not both")
        if self.dedup_window is not None and self.key is None:
            raise ValueError("dedup_window needs a key")
        if self.interactive and kind is not Kind.COMMAND:
            raise ValueError("interactive: only a command runs in a terminal")
        if self.first_input is not None and not self.interactive:
            raise ValueError("first_input: only with interactive")
        if self.first_input is not None and "\x00" in self.first_input:
            raise ValueError("first_input: must not contain NUL bytes")
        return self._isolation(kind)

    def _isolation(self, kind: Kind) -> TaskSpec:
        if self.isolation is None:
            given = [n for n in ("base", "base_commit", "keep") if getattr(self, n) is not None]
            if given:
                raise ValueError(f"{', '.join(given)}: only with isolation: worktree")
            return self
        if kind is not Kind.COMMAND:
            raise ValueError("isolation: worktree is for command tasks")
        if self.repo is None:
            if self.workspace is None:
                raise ValueError(
                    "isolation: worktree needs a repository: give repo (--repo) or a workspace"
                )
            object.__setattr__(self, "repo", self.workspace)
        return self

    @property
    def resolved_kind(self) -> Kind:
        assert self.kind is not None
        return self.kind

    def display_title(self) -> str:
        if self.title:
            return self.title
        text = " ".join(self.command) if self.command else (self.callable or "external task")
        return text if len(text) <= 80 else text[:77] + "..."


def instant(value: Any) -> Any:
    """A start time as epoch seconds, by the one rule of every API (the CLI's `--at`,
    which knows the user's zone, converts its local forms itself, in `cli/when.py`):

    - a number is epoch seconds;
    - a `datetime` is Python's own: an aware one is its instant, a naive one is this
      machine's local time (as `datetime.timestamp()` takes it);
    - a string is ISO 8601 with an offset (`2026-11-24T03:00:00Z`,
      `2026-11-24 03:00+01:00`); one without is refused, since a server cannot know the
      zone its caller meant.

    Anything else is returned as it is, for the field's own validation.

    Raises:
        ValueError: a string that is not ISO 8601, or has no offset.
    """
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str):
        return value
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 time (e.g. 2026-11-24T03:00:00Z)") from None
    if when.tzinfo is None:
        raise ValueError(
            f"{value!r} has no UTC offset: add one, Z for UTC (2026-11-24T03:00:00Z) or "
            "the zone's (2026-11-24T03:00:00+01:00), or give epoch seconds"
        )
    return when.timestamp()


def parse_spec(data: dict[str, Any] | TaskSpec) -> TaskSpec:
    """Validate submit input, turning pydantic's error into one InvalidInput naming the field."""
    if isinstance(data, TaskSpec):
        return data
    try:
        return TaskSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        raise InvalidInput(describe_validation_error(exc)) from exc


def describe_validation_error(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "task"
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "invalid task: " + "; ".join(parts)
