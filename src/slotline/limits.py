"""Concurrency limits: Limit, the keys a limit counts by, and a key's value for a task."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from slotline.bounds import MAX_COUNT, check_number, normalize_workspace
from slotline.errors import InvalidInput


class Keyed(Protocol):
    """What a limit key is read from: a `Task`, or the ETA simulation's lighter entry."""

    @property
    def agent(self) -> str | None: ...
    @property
    def workspace(self) -> str | None: ...
    @property
    def user(self) -> str | None: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def repo(self) -> str | None: ...


# The key of a rate or budget over every task (the concurrency limits call it
# max_concurrent): every task has the same value of it, ''.
GLOBAL = "global"


def limit_key_value(task: Keyed, key: str) -> str | None:
    """The value of a limit key (`agent`, `workspace`, `user`, `repo`, `label:NAME`, or
    `global`, '' for every task) for `task`."""
    if key == GLOBAL:
        return ""
    if key == "repo":
        return task.repo
    if key == "agent":
        return task.agent
    if key == "workspace":
        return task.workspace
    if key == "user":
        return task.user
    if key.startswith("label:"):
        return task.labels.get(key[len("label:") :])
    raise InvalidInput(f"unknown limit key {key!r}")


@dataclass(frozen=True, slots=True)
class Limit:
    """At most `max` running tasks whose `key` equals `value` (any one value if None).
    `origin` says who set it: `config` (slotline.yaml, which owns it) or `api`."""

    key: str
    value: str | None
    max: int
    origin: str = field(default="api", compare=False)

    @property
    def name(self) -> str:
        return self.key if self.value is None else f"{self.key}[{self.value}]"


LIMIT_KEYS = ("agent", "workspace", "user", "repo")


def key_pattern(*others: str) -> str:
    """`check_limit_key` (and the `others` a rate, budget or fairness also takes) as a
    JSON-schema pattern, for the HTTP schema."""
    return f"^({'|'.join((*others, *LIMIT_KEYS))}|label:[\\s\\S]+)$"


def check_limit_key(key: str) -> str:
    """Validate a limit key: agent, workspace, user, repo or label:NAME."""
    if key in LIMIT_KEYS or (key.startswith("label:") and len(key) > len("label:")):
        return key
    raise InvalidInput(f"unknown limit key {key!r}; use agent, workspace, user, repo or label:NAME")


def usage(per_key: Iterable[Limit], running: Iterable[Keyed]) -> list[dict[str, Any]]:
    """Each per-key limit with how many of `running` count against it, per value
    (`{"key", "value", "max", "used": {value: count}}`): what the dashboard's header and
    MCP's queue_status show."""
    running = list(running)
    found = []
    for limit in per_key:
        counts = Counter(
            value for t in running if (value := limit_key_value(t, limit.key)) is not None
        )
        if limit.value is not None:
            counts = Counter({limit.value: counts.get(limit.value, 0)})
        found.append(
            {"key": limit.key, "value": limit.value, "max": limit.max, "used": dict(counts)}
        )
    return found


def check_limit(key: str, value: str | None, max_running: object, origin: str = "api") -> Limit:
    """A per-key limit as the store keeps it (a workspace or repo spelled as tasks store
    it): the one check of every surface and of slotline.yaml.

    Raises:
        InvalidInput: an unknown key, an empty or NUL-bearing value, a bad `max`.
    """
    check_limit_key(key)
    if value is not None and not value:
        raise InvalidInput("a limit value must not be empty")
    if value is not None and "\x00" in value:
        raise InvalidInput("a limit value must not contain NUL bytes")
    if key in ("workspace", "repo") and value is not None:
        value = normalize_workspace(value)  # the spelling tasks store
    return Limit(key, value, check_limit_max(max_running), origin)


def check_limit_max(value: object) -> int:
    """The `max` of a per-key limit: a whole number from 0 to MAX_COUNT.

    Raises:
        InvalidInput: anything else.
    """
    return int(check_number("a limit", value, whole=True, minimum=0, maximum=MAX_COUNT))
