"""Agent types (`agents:` in slotline.yaml): AgentType, its templates' checks, its argv."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from slotline.bounds import ATTEMPTS, COUNT, MEMORY_MB, SECONDS
from slotline.errors import InvalidInput
from slotline.pacing import rates
from slotline.pacing.config import BackoffConfig, check_budget_text
from slotline.pacing.usage import UsageConfig
from slotline.webhooks.config import (
    StallAction,
    StallAfter,
    StallPattern,
    StallRule,
    check_argv_template,
)
from slotline.worktrees.isolation import KeepPolicy
from slotline.worktrees.prune import parse_size

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_ENV_NAME = re.compile(r"[A-Za-z0-9_*?\[\]!-]+")
_PLAIN_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLACEHOLDERS = frozenset({"prompt", "workspace", "title", "user", "agent"})
# `resume` also takes the session id its usage rules read from the interrupted run.
RESUME_PLACEHOLDERS = PLACEHOLDERS | {"session_id"}
DEFAULT_RESUME_PROMPT = "continue where you stopped"


class AgentType(BaseModel):
    """An agent others may submit by name: the config owns the command, they give a prompt."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    command: list[str] = Field(min_length=1)
    max_concurrent: Annotated[int, COUNT] | None = None
    global_pool: bool = True
    timeout: Annotated[float, SECONDS] | None = None
    max_attempts: Annotated[int, ATTEMPTS] = 1
    memory_mb: Annotated[int, MEMORY_MB] | None = None
    expected_duration: Annotated[float, SECONDS] | None = None
    # At most N starts per period of this type (`20/1m`), and its provider back-off.
    rate: str | None = None
    backoff: BackoffConfig | None = None
    # At most so much spend of this type's finished runs per period: `50usd/1d`, or a
    # list (a dollar and a token budget).
    budget: str | list[str] | None = None
    # Variables of the node's environment its runs get, beside the base allow-list and
    # the global `env_allow`: a provider's key goes to the agents that use it, not to
    # every run. `env_required` names (no globs) are those a run needs (ANTHROPIC_API_KEY):
    # passed too, and `agents check` warns when one is not set; `env_allow` names and
    # patterns are optional settings, only passed.
    env_required: EnvRequired = Field(default_factory=list)
    env_allow: EnvAllow = Field(default_factory=list)
    # The dry run `slotline agents check` makes (default: `BINARY --version`).
    probe: list[str] | None = Field(default=None, min_length=1)
    # A prompt that is a whole argv element may start with `-` only if the type says so
    # (see `check_options`); a command that takes options from its users opts in here.
    prompt_may_start_with_dash: bool = False
    # Run each task of this type in a git worktree of `repo` (default: the task's
    # workspace) at `base` (default: HEAD at submit); `keep` says what happens to it.
    isolation: Literal["worktree"] | None = None
    repo: str | None = None
    base: str | None = None
    keep: KeepPolicy | None = Field(default=None, strict=False)
    # How long this type's finished worktrees stay (overrides `worktrees.retain`), and
    # how much disk they may take together (besides `worktrees.max_disk`, which counts
    # every type's).
    retain: RetainPeriod = Field(default=None, strict=False)
    max_disk: DiskSize = Field(default=None, strict=False)

    # A run that prints nothing for `stall_after` (`10m`), or prints `stall_pattern` (a
    # "waiting for input" prompt, RE2), is stalled; `on_stall: terminate` then stops it.
    stall_after: StallAfter = None
    stall_pattern: StallPattern = None
    on_stall: StallAction = "none"

    @property
    def stall(self) -> StallRule | None:
        """Its stall rule, or None when it has none."""
        if self.stall_after is None and self.stall_pattern is None:
            return None
        terminate = self.on_stall == "terminate"
        return StallRule(after=self.stall_after, pattern=self.stall_pattern, terminate=terminate)

    # Run in a terminal people attach to and type into (docs/coding-agents.md, "Interactive
    # runs"). Such a run needs input once its terminal has been quiet for `idle_after`
    # (default 30s) while it waits on it; with `release_while_idle` it gives its slot
    # back meanwhile and takes one again before someone's input reaches it.
    interactive: bool = False
    idle_after: StallAfter = None
    release_while_idle: bool = False
    # Typed into the run's terminal as it starts, then Enter: a template (`{prompt}`…)
    # for an agent that takes no first message on its command line (aider).
    first_input: str | None = Field(default=None, min_length=1, max_length=64 * 1024)

    @pydantic.model_validator(mode="after")
    def _interactive_only(self) -> AgentType:
        given = [
            name
            for name, value in (
                ("idle_after", self.idle_after),
                ("release_while_idle", self.release_while_idle or None),
                ("first_input", self.first_input),
            )
            if value is not None
        ]
        if given and not self.interactive:
            raise ValueError(f"{', '.join(given)}: only with interactive: true")
        return self

    # Where its runs print what they spent and their session id (`pacing/usage.py`), and how
    # to continue an interrupted run's session instead of starting over.
    usage: UsageConfig | None = None
    resume: list[str] | None = Field(default=None, min_length=1)
    resume_prompt: str = Field(default=DEFAULT_RESUME_PROMPT, min_length=1, max_length=100_000)

    @field_validator("repo")
    @classmethod
    def _repo(cls, repo: str | None) -> str | None:
        if repo is None:
            return None
        path = os.path.expanduser(repo)
        if not os.path.isabs(path):
            raise ValueError("must be an absolute path (or start with ~)")
        return path

    @field_validator("budget")
    @classmethod
    def _budget(cls, budget: str | list[str] | None) -> str | list[str] | None:
        for each in [budget] if isinstance(budget, str) else budget or []:
            check_budget_text(each)
        return budget

    @field_validator("rate")
    @classmethod
    def _rate(cls, rate: str | None) -> str | None:
        if rate is not None:
            try:
                rates.parse_rate(rate)
            except InvalidInput as exc:
                raise ValueError(str(exc)) from None
        return rate

    @field_validator("command")
    @classmethod
    def _placeholders(cls, command: list[str]) -> list[str]:
        return check_argv_template(command, PLACEHOLDERS)

    @field_validator("probe")
    @classmethod
    def _probe(cls, probe: list[str] | None) -> list[str] | None:
        return None if probe is None else check_argv_template(probe, frozenset())

    @field_validator("first_input")
    @classmethod
    def _first_input(cls, first: str | None) -> str | None:
        for name in _PLACEHOLDER.findall(first or ""):
            if name not in PLACEHOLDERS:
                known = ", ".join(sorted(PLACEHOLDERS))
                raise ValueError(f"unknown placeholder {{{name}}}; known: {known}")
        if first is not None and "\x00" in first:
            raise ValueError("must not contain NUL bytes")
        return first

    @field_validator("resume")
    @classmethod
    def _resume(cls, resume: list[str] | None) -> list[str] | None:
        if resume is None:
            return None
        check_argv_template(resume, RESUME_PLACEHOLDERS)
        if not any("{session_id}" in element for element in resume):
            raise ValueError("must contain {session_id}: the session it continues")
        return resume

    @pydantic.model_validator(mode="after")
    def _resume_needs_session(self) -> AgentType:
        if self.resume is None:
            return self
        rules = self.usage
        if rules is None or ("session_id" not in rules.json_paths | rules.regex):
            raise ValueError(
                "resume needs usage rules that read session_id (usage: {json: "
                "{session_id: PATH}} or usage: {regex: {session_id: PATTERN}})"
            )
        return self

    def check_options(
        self, name: str, values: Mapping[str, str], template: list[str] | None = None
    ) -> None:
        """The one rule against option injection: a value (prompt, title, user) must not
        start an argv element with `-` unless a `--` element comes before it: the command
        would read it as an option (`--output=/some/file`). `--` before the placeholder,
        or `--flag={prompt}`, is safe; a type whose command takes options from its users
        sets `prompt_may_start_with_dash` (for the prompt only).

        Raises:
            InvalidInput: a value would be read as an option; the message names it.
        """
        for element in template or self.command:
            if element == "--":
                return  # every later element is an operand
            first = _PLACEHOLDER.match(element)
            if first is None or not self._fill(element, values).startswith("-"):
                continue
            # The placeholder whose value put the dash there (earlier ones may be empty).
            field = next(f for f in _PLACEHOLDER.findall(element) if values.get(f, ""))
            if field == "prompt" and self.prompt_may_start_with_dash:
                continue
            opt_in = ", or set prompt_may_start_with_dash: true" if field == "prompt" else ""
            raise InvalidInput(
                f"{field}: must not start with '-' for agent type {name!r}: its command "
                f"would read it as an option (the agent type can put '--' before "
                f"{{{field}}}, or write it as --flag={{{field}}}{opt_in})"
            )

    def argv(self, values: Mapping[str, str], template: list[str] | None = None) -> list[str]:
        """The command (or `template`, e.g. `resume`) with each placeholder replaced
        inside its own argv element: a prompt with spaces or quotes stays one element
        and is never shell-parsed."""
        return [self._fill(element, values) for element in template or self.command]

    @staticmethod
    def _fill(element: str, values: Mapping[str, str]) -> str:
        return _PLACEHOLDER.sub(lambda match: values.get(match.group(1), ""), element)


def _env_names(value: Any) -> Any:
    """An `env_allow:` list: each a variable name or a glob pattern of names (`AWS_*`)."""
    for name in value if isinstance(value, list) else []:
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not an environment variable name or a glob pattern of "
                "names (letters, digits, _, and * ? [ ] as wildcards)"
            )
    return value


def _required_names(value: Any) -> Any:
    """An `env_required:` list: each a plain variable name (its check looks each one up)."""
    for name in value if isinstance(value, list) else []:
        if not isinstance(name, str) or not _PLAIN_ENV_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not an environment variable name (letters, digits and _, "
                "not starting with a digit; glob patterns go in env_allow)"
            )
    return value


def _disk_size(value: Any) -> Any:
    """A `max_disk:` size (`20GB`, or bytes) as bytes (None stays None)."""
    if value is None:
        return None
    try:
        return parse_size(value)
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None


def _retain_period(value: Any) -> Any:
    """A `retain:` period (`3d`, or seconds) as seconds (None stays None)."""
    if value is None:
        return None
    try:
        return rates.parse_period(value)
    except InvalidInput as exc:
        raise ValueError(str(exc).replace("a rate's period", "a period")) from None


# An agent type's `retain:` and `max_disk:`, and the `worktrees:` ones they override.
RetainPeriod = Annotated[float | None, BeforeValidator(_retain_period)]
DiskSize = Annotated[int | None, BeforeValidator(_disk_size)]
# Its `env_allow:` (and the global one's) names and patterns.
EnvAllow = Annotated[list[str], BeforeValidator(_env_names)]
# Its `env_required:` names.
EnvRequired = Annotated[list[str], BeforeValidator(_required_names)]
