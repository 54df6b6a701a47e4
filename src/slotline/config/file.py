"""Settings from slotline.yaml, overridden by SLOTLINE_* environment variables and flags.

The file is the first of: `--config FILE`, `$SLOTLINE_CONFIG`, the project's
`slotline.yaml` (in the current folder or the nearest folder above it), the user's
`$XDG_CONFIG_HOME/slotline/slotline.yaml`; without one, the defaults apply. Relative paths
in the file are relative to its folder. Errors name the key and the line.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from slotline.bounds import COUNT, Range
from slotline.config import settings as table
from slotline.config.agent_types import AgentType, DiskSize, EnvAllow, RetainPeriod
from slotline.config.declared import check_declared_once
from slotline.errors import InvalidInput
from slotline.limits import check_limit_key
from slotline.pacing.config import BudgetConfig, FairnessConfig, RateConfig
from slotline.reach import UsersConfig
from slotline.webhooks.config import OnEvent, Webhooks, public_url
from slotline.worktrees.isolation import KeepPolicy
from slotline.worktrees.prune import WorktreePolicy


class LimitConfig(BaseModel):
    """At most `max` running tasks per value of `key` (or for the one named `value`)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    value: str | None = None
    max: Annotated[int, COUNT]

    @field_validator("key")
    @classmethod
    def _key(cls, key: str) -> str:
        try:
            return check_limit_key(key)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None


class WorktreesConfig(BaseModel):
    """The worktree policy (`worktrees:`): the default `keep` of worktree tasks, how long
    finished runs' worktrees stay (`retain: 3d`), and how much disk they may take
    together (`max_disk: 20GB`); `slotline.worktrees.prune` applies it."""

    model_config = ConfigDict(extra="forbid")

    keep: KeepPolicy | None = None
    retain: RetainPeriod = None
    max_disk: DiskSize = None


class Admission(BaseModel):
    """No new start while the machine is past these thresholds."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    max_cpu_percent: Annotated[float, Range(0, 100, above=True)] | None = None
    min_available_mb: Annotated[int, Range(0, 2**40, whole=True, unit="MiB")] | None = None
    # Shrink the effective limit under pressure and grow it back afterwards.
    adaptive: bool = False


class ScheduleConfig(BaseModel):
    """A recurring schedule declared in slotline.yaml (`schedules: {NAME: …}`): `task`
    (the fields of a submit; an agent type with a prompt works) at each tick of `cron`."""

    model_config = ConfigDict(extra="forbid")

    cron: str
    tz: str = "UTC"
    overlap: Literal["skip", "queue", "replace"] = "skip"
    paused: bool = False
    task: dict[str, Any]


class Config(BaseModel):
    """The whole configuration; every key is optional."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    store: str | None = None
    # The settings of the table (config/settings.py), with its defaults and bounds.
    max_concurrent: Annotated[int, table.bounds("max_concurrent")] = table.default("max_concurrent")
    limits: list[LimitConfig] = Field(default_factory=list)
    rates: list[RateConfig] = Field(default_factory=list)
    budgets: list[BudgetConfig] = Field(default_factory=list)
    fairness: FairnessConfig | None = None
    agents: dict[str, AgentType] = Field(default_factory=dict)
    admission: Admission = Field(default_factory=Admission)
    aging_interval: Annotated[float, table.bounds("aging_interval")] | None = table.default(
        "aging_interval"
    )
    max_depth: Annotated[int, table.bounds("max_depth")] = table.default("max_depth")
    max_children: Annotated[int, table.bounds("max_children")] = table.default("max_children")
    max_queue_size: Annotated[int, table.bounds("max_queue_size")] = table.default("max_queue_size")
    # Tasks waiting to start of any one user; None: no bound but max_queue_size.
    max_queued_per_user: Annotated[int, table.bounds("max_queued_per_user")] | None = table.default(
        "max_queued_per_user"
    )
    kill_grace: Annotated[float, table.bounds("kill_grace")] = table.default("kill_grace")
    # This node's own: how long its runs stay its own without a heartbeat (other nodes
    # reap them after that), and how many it runs at most (None: no cap of its own).
    lease: Annotated[float, table.bounds("lease")] = table.default("lease")
    slots: Annotated[int, table.bounds("slots")] | None = table.default("slots")
    log_max_bytes: Annotated[int, table.bounds("log_max_bytes")] = table.default("log_max_bytes")
    # This node's own: keep the machine from sleeping while it has runs (node/awake.py).
    keep_awake: bool = table.default("keep_awake")
    env_allow: EnvAllow = Field(default_factory=list)
    # Who may submit raw commands (argv lists, env) over HTTP; others submit agent types.
    raw_commands: Literal["all", "admins"] = "admins"
    # Whether user and task tokens read queue-wide totals (every user's task counts in
    # /api/stats, the charts' samples, /metrics); by default they read their own only.
    share_totals: bool = False
    # Host names the HTTP API answers to beyond loopback and the bind address (a DNS name
    # for `serve --host 0.0.0.0`), and browser origins allowed to change state.
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    # `none`: open mode asked for: the HTTP API (on loopback only) takes every caller as
    # the local admin, even once tokens have existed. `tokens`: tokens once any exist.
    auth: Literal["tokens", "none"] = "tokens"
    # What a user token may choose: workspaces, repositories, merge targets, start now
    # over the limit, functions (slotline/reach.py). Admins choose anything.
    users: UsersConfig = Field(default_factory=UsersConfig)
    # Recurring schedules owned by this file (`slotline serve` makes the store match).
    schedules: dict[str, ScheduleConfig] = Field(default_factory=dict)
    worktrees: WorktreesConfig = Field(default_factory=WorktreesConfig)
    # Webhooks and command hooks (webhooks/config.py); admins only: no user token reads them.
    notify: Webhooks = Field(default_factory=list)
    on_event: OnEvent = Field(default_factory=dict)
    _source: str | None = PrivateAttr(default=None)

    @property
    def source(self) -> str | None:
        """The file this configuration was read from, if any."""
        return self._source

    @model_validator(mode="after")
    def _declared_once(self) -> Config:
        check_declared_once(self)
        return self

    @field_validator("env_allow", mode="before")
    @classmethod
    def _env_allow(cls, value: Any) -> Any:
        """`$SLOTLINE_ENV_ALLOW` gives the names separated by commas or spaces."""
        if isinstance(value, str):
            return [name for name in re.split(r"[\s,]+", value) if name]
        return value

    def worktree_policy(self) -> WorktreePolicy:
        """The retention policy of `worktrees:` and the agent types' `retain` and
        `max_disk`."""
        agents = self.agents.items()
        retains = {name: a.retain for name, a in agents if a.retain is not None}
        caps = {name: a.max_disk for name, a in agents if a.max_disk is not None}
        return WorktreePolicy(self.worktrees.retain, self.worktrees.max_disk, retains, caps)

    def agent(self, name: str) -> AgentType:
        try:
            return self.agents[name]
        except KeyError:
            known = ", ".join(sorted(self.agents)) or "none are configured"
            raise InvalidInput(f"unknown agent type {name!r} (known: {known})") from None


# SLOTLINE_<NAME> environment variables that override top-level keys.
ENV_KEYS = ("store", *(setting.name for setting in table.FROM_FILE), "env_allow")


CONFIG_NAME = "slotline.yaml"


def user_config_file() -> Path:
    """The user's file: `$XDG_CONFIG_HOME/slotline/slotline.yaml` (~/.config by default)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "slotline" / CONFIG_NAME


def find_config_file(explicit: str | Path | None) -> Path | None:
    """The file to read, as an absolute path: `explicit` (`--config FILE`), else
    `$SLOTLINE_CONFIG`, else `slotline.yaml` in the current folder or the nearest folder
    above it (up to the root, as git finds its repository), else `user_config_file()`;
    None when there is none.

    Raises:
        InvalidInput: the file named by `explicit` or `$SLOTLINE_CONFIG` does not exist, or
            the current folder does not (it was removed).
    """
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise InvalidInput(f"config file {path} does not exist")
        return path.absolute()
    env = os.environ.get("SLOTLINE_CONFIG")
    if env:
        path = Path(env)
        if not path.is_file():
            raise InvalidInput(f"SLOTLINE_CONFIG names {path}, which does not exist")
        return path.absolute()
    try:
        here = Path.cwd()
    except FileNotFoundError:
        raise InvalidInput(
            "the current folder no longer exists: cd to one that does, or give --config FILE"
        ) from None
    for folder in (here, *here.parents):
        candidate = folder / CONFIG_NAME
        if candidate.is_file() and _trusted(candidate):
            return candidate
    user = user_config_file()
    return user.absolute() if user.is_file() else None


def _trusted(path: Path) -> bool:
    """Whether a slotline.yaml found above the current folder may be read: owned by this
    user or root and not writable by everyone (as git's safe.directory: a file another
    user planted in a shared parent such as /tmp would otherwise choose the commands
    this user's agents and hooks run). A file passed over is said on stderr."""
    try:
        info = path.stat()
    except OSError:
        return False
    if info.st_uid in (os.getuid(), 0) and not info.st_mode & stat.S_IWOTH:
        return True
    print(
        f"warning: {path} is ignored: it is owned by another user or writable by everyone "
        "(pass it with --config to use it anyway)",
        file=sys.stderr,
    )
    return False


def lookup_places() -> str:
    """Where `find_config_file` looks without `--config` or `$SLOTLINE_CONFIG`, for a
    message that none was found."""
    return f"{Path.cwd()} and the folders above it, then {user_config_file()}"


def _resolve_paths(data: dict[str, Any], folder: Path) -> None:
    """Make the file's relative paths (a `store` file, an agent type's `repo`, the
    folders of `users:`) relative to `folder`, the file's own, not to wherever slotline runs."""

    def resolved(value: Any) -> Any:
        if not isinstance(value, str) or not value or "://" in value:
            return value
        if value.startswith("~") or os.path.isabs(value):
            return value
        return os.path.normpath(folder / value)

    if "store" in data:
        data["store"] = resolved(data["store"])
    users = data.get("users")
    if isinstance(users, dict):
        for key in ("workspaces", "repos"):
            if isinstance(users.get(key), list):
                users[key] = [resolved(path) for path in users[key]]
        if isinstance(users.get("merge_into"), dict):
            users["merge_into"] = {resolved(r): b for r, b in users["merge_into"].items()}
    agents = data.get("agents")
    if isinstance(agents, dict):
        for agent in agents.values():
            if isinstance(agent, dict) and "repo" in agent:
                agent["repo"] = resolved(agent["repo"])


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """The effective configuration: file, then SLOTLINE_* variables, then `overrides`
    (flags; None values are ignored).

    Raises:
        InvalidInput: the file is not valid YAML or a key is wrong (the message names the
            key and its line).
    """
    found = find_config_file(path)
    data: dict[str, Any] = {}
    lines: dict[tuple[str | int, ...], int] = {}
    if found is not None:
        try:
            text = found.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(
                f"{found}: cannot be read ({exc.__class__.__name__}: {exc}); fix it, or "
                "give another file with --config"
            ) from None
        try:
            node = yaml.compose(text, Loader=yaml.SafeLoader)
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidInput(f"{found}: not valid YAML: {exc}") from exc
        if loaded is not None and not isinstance(loaded, dict):
            raise InvalidInput(f"{found}: the top level must be a mapping of keys")
        data = loaded or {}
        _resolve_paths(data, found.parent)
        if node is not None:
            _record_lines(node, (), lines)
    source = os.environ if env is None else env
    for key in ENV_KEYS:
        value = source.get(f"SLOTLINE_{key.upper()}")
        if value is not None and value != "":
            data[key] = value
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    try:
        config = Config.model_validate(data)
    except pydantic.ValidationError as exc:
        raise InvalidInput(_describe(exc, found, lines)) from exc
    config._source = str(found) if found is not None else None
    if "max_concurrent" in data and config.max_concurrent == 0:
        warn_no_slots(f"{found or 'the environment'} sets it")
    return config


def warn_no_slots(where: str) -> None:
    """Say on stderr that max_concurrent is 0 (`where`: who set it): it is valid (a way
    to let nothing start), but nothing then starts, which is seldom what was meant."""
    print(
        f"warning: max_concurrent is 0 ({where}): no task starts until it is raised "
        "(slotline limits --set max_concurrent=N); to stop starts for a while, "
        "slotline pause says so",
        file=sys.stderr,
    )


def _record_lines(
    node: yaml.Node, path: tuple[str | int, ...], lines: dict[tuple[str | int, ...], int]
) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[(*path, key)] = key_node.start_mark.line + 1
            _record_lines(value_node, (*path, key), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _record_lines(item, (*path, index), lines)


def _describe(
    exc: pydantic.ValidationError, found: Path | None, lines: dict[tuple[str | int, ...], int]
) -> str:
    parts = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        where = ".".join(str(p) for p in loc) or "config"
        line = None
        for cut in range(len(loc), -1, -1):
            line = lines.get(loc[:cut])
            if line is not None:
                break
        prefix = f"{found}:{line}: " if found is not None and line else ""
        message = error["msg"].removeprefix("Value error, ")
        parts.append(f"{prefix}{where}: {message}")
    return "invalid configuration: " + "; ".join(parts)


def redact_url(url: str) -> str:
    """The URL with any password replaced by `***`."""
    return re.sub(r"://([^:/@]+):[^@/]+@", r"://\1:***@", url)


def holds_secret(url: str) -> bool:
    """Whether a store URL carries a password (in its authority or its query)."""
    return redact_url(url) != url or bool(re.search(r"(?i)[?&]password=", url))


def shown_store(url: str) -> str:
    """A store URL as it may be printed: its password, in the authority or the query,
    replaced by `***`."""
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", redact_url(url))


def redacted(config: Config, admin: bool = True) -> dict[str, Any]:
    """The effective configuration as JSON, with any password in the store URL hidden,
    webhook secrets and URL credentials left out, and the hooks (`notify`, `on_event`)
    shown to admins only."""
    data = config.model_dump(mode="json")
    if data.get("store"):
        data["store"] = shown_store(data["store"])
    if not admin:
        data.pop("notify", None)
        data.pop("on_event", None)
    for hook in data.get("notify", []):
        hook["url"] = public_url(hook["url"])
        hook["secret"] = None if hook["secret"] is None else "***"
    return data
