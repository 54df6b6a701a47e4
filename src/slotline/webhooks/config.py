"""The sections of slotline.yaml that say who hears what: `notify` (webhooks), `on_event`
(command hooks), and an agent type's stall rule (`stall_after`, `stall_pattern`,
`on_stall`). Hook event names are dotted (`task.failed`); each stands for one kind of
the event log (`EVENT_KINDS`)."""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

import pydantic
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from slotline.bounds import SECONDS, Range
from slotline.errors import InvalidInput
from slotline.pacing import rates
from slotline.pacing.backoff import checked_pattern

# The names hooks select events by, and the event-log kind each one is.
EVENT_KINDS = {
    "task.submitted": "submitted",
    "task.started": "started",
    "task.succeeded": "succeeded",
    "task.failed": "failed",
    "task.retry": "retry",
    "task.cancelled": "cancelled",
    "task.terminated": "terminated",
    "task.expired": "expired",
    "task.blocked": "blocked",
    "task.requeued": "requeued",
    "task.stalled": "stalled",
    "task.unstalled": "unstalled",
    "task.needs_input": "needs_input",
    "task.output_resumed": "output_resumed",
    "task.denied": "denied",
    "queue.drained": "drained",
    "budget.reached": "budget_reached",
    "node.started": "node_started",
    "node.stopped": "node_stopped",
}
EVENT_NAMES = {kind: name for name, kind in EVENT_KINDS.items()}

# What a command hook's argv template may name, filled from the event and its task.
HOOK_PLACEHOLDERS = frozenset(
    {"event", "seq", "id", "title", "status", "agent", "workspace", "user", "reason"}
)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# The ones whose value never starts with '-': fixed words, numbers, hex ids, absolute paths.
# The others (title, reason, user, agent) are chosen by whoever submits.
_NEVER_DASHED = frozenset({"event", "seq", "id", "status", "workspace"})


def check_event_name(name: str) -> str:
    """A hook's event name, or a clear error naming the known ones."""
    if name not in EVENT_KINDS:
        known = ", ".join(sorted(EVENT_KINDS))
        raise ValueError(f"unknown event {name!r}; known: {known}")
    return name


def public_url(url: str) -> str:
    """A webhook URL as logs, errors and answers show it: scheme and host only. A path
    or query (Slack, Discord and Telegram carry their token in the path) is replaced by
    `/…#` and a short SHA-256 of the whole URL, so that two hooks on one host stay
    apart and the name stays the same from one start to the next; credentials are left
    out. A URL with no path (or just `/`) and no query shows as it is, less credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    if parts.path in ("", "/") and not parts.query:
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return f"{parts.scheme}://{host}/…#{digest}"


class WebhookConfig(BaseModel):
    """One webhook: POST each selected event to `url`, signed with `secret`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    url: str
    events: list[str] = Field(min_length=1)
    # Signs each body (`Slotline-Signature`); never shown by any read.
    secret: pydantic.SecretStr | None = None
    # Names the webhook in `notify log` and its cursor (default: `public_url`, its
    # scheme and host and a short hash of the rest).
    name: str | None = Field(default=None, min_length=1, max_length=200)
    timeout: Annotated[float, Range(0, 60, unit="seconds", above=True)] = 10.0
    # Tries of one event before it is skipped (logged); None: until it is delivered
    # (at least once), the tries 1 s, 2 s, 4 s … apart, at most 5 min.
    max_attempts: Annotated[int, Range(1, 1000, whole=True)] | None = None

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http:// or https:// URL with a host")
        return url

    @field_validator("events")
    @classmethod
    def _events(cls, events: list[str]) -> list[str]:
        return [check_event_name(name) for name in events]

    @property
    def hook(self) -> str:
        """The name of its cursor and its lines in the delivery log."""
        return self.name or public_url(self.url)


class StallRule(BaseModel):
    """When a run of an agent type counts as stalled, and what then happens to it."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)

    after: Annotated[float, SECONDS] | None = None
    pattern: str | None = None
    terminate: bool = False


def check_argv_template(argv: list[str], known: frozenset[str]) -> list[str]:
    """An argv template (an agent type's command or resume, a command hook): a fixed
    program, only `known` placeholders, no NUL byte."""
    if not argv:
        raise ValueError("give the command as a non-empty list (argv)")
    if not argv[0] or "{" in argv[0]:
        raise ValueError("the program (first element) must be a fixed, non-empty name")
    for element in argv:
        if "\x00" in element:
            raise ValueError("command elements must not contain NUL bytes")
        for name in _PLACEHOLDER.findall(element):
            if name not in known:
                names = ", ".join(sorted(known))
                raise ValueError(f"unknown placeholder {{{name}}}; known: {names}")
    return argv


def fill_hook_command(argv: list[str], values: dict[str, str]) -> list[str]:
    """The template with each placeholder replaced inside its own argv element (a title
    with spaces stays one element; nothing is shell-parsed).

    Raises:
        InvalidInput: a value would start an element with `-` before any `--` element,
            where the command would read it as an option (the rule agent commands
            follow, `AgentType.check_options`): a title `--output=/etc/x` runs nothing.
    """
    filled = []
    operands = False
    for element in argv:
        value = _PLACEHOLDER.sub(lambda m: values.get(m.group(1), ""), element)
        if element == "--":
            operands = True
        elif not operands and _PLACEHOLDER.match(element) and value.startswith("-"):
            field = next(f for f in _PLACEHOLDER.findall(element) if values.get(f, ""))
            raise InvalidInput(
                f"{field} starts with '-' and the hook's command would read it as an "
                f"option; put '--' before {{{field}}} in the hook, or write --flag={{{field}}}"
            )
        filled.append(value)
    return filled


def check_on_event(on_event: Any) -> Any:
    """`on_event: {EVENT: ARGV}` or `{EVENT: [ARGV, ARGV]}`, as lists of argv templates."""
    if not isinstance(on_event, dict):
        return on_event  # the type check names what is wrong
    checked: dict[str, list[list[str]]] = {}
    for name, value in on_event.items():
        check_event_name(name)
        if not isinstance(value, list) or not value:
            raise ValueError(f"{name}: give a command as a list of strings (argv)")
        commands: list[Any] = [value] if isinstance(value[0], str) else value
        for argv in commands:
            if not isinstance(argv, list) or not all(isinstance(v, str) for v in argv):
                raise ValueError(f"{name}: give a command as a list of strings (argv)")
            check_argv_template(argv, HOOK_PLACEHOLDERS)
            check_no_option(name, argv)
        checked[name] = [list(argv) for argv in commands]
    return checked


def check_no_option(event: str, argv: list[str]) -> None:
    """Refuse a hook whose template begins an argument with a value a submitter chooses
    (`{title}`, `{reason}`, `{user}`, `{agent}`) before any `--` argument.

    Filled with a title `-x`, such an argument would be read as an option, so the hook
    could never run for that task (`fill_hook_command` refuses it): every event of a
    hook that loads is delivered, whatever its task is called.
    """
    for element in argv[1:]:
        if element == "--":
            return
        start = _PLACEHOLDER.match(element)
        if start and start.group(1) not in _NEVER_DASHED:
            field = start.group(1)
            raise ValueError(
                f"{event}: {{{field}}} begins an argument with no '--' before it, so a "
                f"{field} such as '-x' would be read as an option and the hook could not "
                f"run; put '--' before it, or write --{field}={{{field}}} or text before "
                f"it ('task {{{field}}}')"
            )


def check_unique_hooks(hooks: list[WebhookConfig]) -> list[WebhookConfig]:
    seen: set[str] = set()
    for hook in hooks:
        if hook.hook in seen:
            raise ValueError(f"two webhooks are named {hook.hook!r}; give each a `name`")
        seen.add(hook.hook)
    return hooks


def parse_stall_after(value: Any) -> Any:
    """`stall_after: 10m` (or a number of seconds) as seconds."""
    if isinstance(value, str):
        try:
            return rates.parse_period(value)
        except InvalidInput:
            raise ValueError(f"{value!r} is not a duration; use e.g. 90s, 10m, 1h") from None
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


StallAction = Literal["none", "terminate"]
StallAfter = Annotated[
    Annotated[float, SECONDS] | None, BeforeValidator(parse_stall_after), Field(default=None)
]
StallPattern = Annotated[str | None, AfterValidator(checked_pattern)]
Webhooks = Annotated[list[WebhookConfig], AfterValidator(check_unique_hooks)]
OnEvent = Annotated[dict[str, list[list[str]]], BeforeValidator(check_on_event)]
