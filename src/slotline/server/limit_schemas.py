"""The bodies and answers of `/api/limits` (per-key limits, rates, fairness, provider
back-off) and the pacing entries of `/api/status`, as they appear in the OpenAPI
document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, create_model

from slotline.bounds import COUNT, MAX_COUNT, Range, Spelled
from slotline.config import settings as table
from slotline.limits import check_limit_key, key_pattern
from slotline.pacing.rates import check_rate_key
from slotline.scheduler.fairness import check_fairness
from slotline.server.fields import StrictWhole


class LimitSet(BaseModel):
    """At most `max` running tasks per value of `key` (or for one `value`); null removes."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[str, Spelled(key_pattern(), check_limit_key)] = Field(
        description="agent, workspace, user, repo or label:NAME"
    )
    value: str | None = None
    max: Annotated[StrictWhole, COUNT] | None


class RateSet(BaseModel):
    """At most `max` starts per `period` (seconds, or `30s`, `1m`, `2h`, `1d`) of the tasks
    whose `key` (global, agent, workspace, user, label:NAME) is `value` (each value apart
    if null); `max` null removes the rate."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[str, Spelled(key_pattern("global"), check_rate_key)]
    value: str | None = None
    max: Annotated[StrictWhole, Range(1, MAX_COUNT, whole=True)] | None
    period: float | str | None = None


class BudgetSet(BaseModel):
    """At most `amount` spent (`unit` usd: dollars; tok: tokens in and out) by the runs
    that finished in the last `period` (seconds, or `1h`, `1d`) of the tasks whose `key`
    (global, agent, workspace, user, repo, label:NAME) is `value` (each value apart if
    null). A budget is one window: setting one replaces the budget of that key, value,
    unit and period, and keeps the others (`10usd/1h` and `100usd/1d` hold together).
    `amount` null removes budgets: of `unit` (every unit if null) and of the window
    `period` (every window if null)."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[str, Spelled(key_pattern("global"), check_rate_key)]
    value: str | None = None
    amount: float | None = Field(gt=0, allow_inf_nan=False)
    period: float | str | None = None
    unit: Literal["usd", "tok"] | None = "usd"


class FairnessSet(BaseModel):
    """Take turns between the values of `key` (user, workspace, agent, parent,
    label:NAME) within each priority level; a value's weight is its share (1 if absent)."""

    model_config = ConfigDict(extra="forbid")

    key: Annotated[str, Spelled(key_pattern("parent"), check_fairness)]
    weights: dict[str, float] = Field(default_factory=dict, max_length=1000)


class BackoffSet(BaseModel):
    """An agent type's provider back-off rule (fields as in slotline.yaml: exit_codes,
    pattern, delay, max_delay, min_concurrent, recover_after, max_requeues); null removes
    it and ends a back-off in force."""

    model_config = ConfigDict(extra="forbid")

    agent: str = Field(min_length=1, max_length=200)
    rule: dict[str, Any] | None


def _setting_field(setting: table.Setting) -> Any:
    number: Any = Annotated[setting.kind, Strict(), table.bounds(setting.name)]
    return (number | None if setting.optional else number), Field(None, description=setting.meaning)


# What `settings` takes, from the table: each of the queue's settings with its type and
# bounds (null where it lifts the bound), and `paused`; strict (`false` is no number).
if TYPE_CHECKING:
    SettingsSet = BaseModel
else:
    SettingsSet = create_model(
        "SettingsSet",
        __config__=ConfigDict(extra="forbid"),
        paused=(Annotated[bool, Strict()], Field(None, description="Stop starting tasks")),
        **{setting.name: _setting_field(setting) for setting in table.QUEUE},
    )


class LimitsBody(BaseModel):
    """Settings (max_concurrent, bounds, aging_interval…), per-key limits, rates,
    fairness (null turns it off; absent leaves it) and back-off rules to change."""

    model_config = ConfigDict(extra="forbid")

    settings: SettingsSet = Field(
        default_factory=SettingsSet,
        description="The queue's settings to change, by name (config/settings.py)",
    )
    limits: list[LimitSet] = Field(default_factory=list, max_length=100)
    exempt_agents: list[str] | None = None
    rates: list[RateSet] = Field(default_factory=list, max_length=100)
    budgets: list[BudgetSet] = Field(default_factory=list, max_length=100)
    fairness: FairnessSet | None = None
    backoff: list[BackoffSet] = Field(default_factory=list, max_length=100)

    def changed_settings(self) -> dict[str, Any]:
        """The settings the request names, with their values."""
        return self.settings.model_dump(exclude_unset=True)


class LimitOut(BaseModel):
    key: str
    value: str | None
    max: int


class RateOut(BaseModel):
    key: str
    value: str | None
    max: int
    period: float
    rate: str = Field(description="As `slotline limits` spells it: 20/1m")
    origin: Literal["config", "api"] = Field(
        "api", description="config: slotline.yaml declares it (and owns it); api: set at run time"
    )


class BudgetOut(BaseModel):
    key: str
    value: str | None
    amount: float = Field(description="Dollars (unit usd) or tokens (unit tok)")
    unit: str = Field(description="usd or tok (input and output tokens together)")
    period: float
    budget: str = Field(description="As `slotline limits` spells it: 50usd/1d, 2Mtok/1h")
    origin: Literal["config", "api"] = Field(
        "api", description="config: slotline.yaml declares it (and owns it); api: set at run time"
    )


class LimitsOut(BaseModel):
    """The settings as stored, with the per-key limits, the rates, the fairness and the
    back-off rules per agent type."""

    model_config = ConfigDict(extra="allow")

    max_concurrent: int
    paused: bool
    exempt_agents: list[str]
    limits: list[LimitOut]
    rates: list[RateOut] = Field(default_factory=list)
    budgets: list[BudgetOut] = Field(default_factory=list)
    fairness: dict[str, Any] | None = None
    backoff: dict[str, dict[str, Any]] = Field(default_factory=dict)


class RateStateOut(RateOut):
    used: int = Field(description="Starts in the window now")
    per_value: bool = Field(False, description="A rate counted per value, shown for this one")
    next_start_at: float | None = Field(description="When the next start is allowed; null: now")


class BudgetStateOut(BudgetOut):
    spent: float = Field(description="What the runs finished in the window spent")
    per_value: bool = Field(False, description="A budget counted per value, shown for this one")
    until: float | None = Field(
        description="Reached: when enough spend ages out for tasks to start (epoch seconds); "
        "null: not reached"
    )


class BackoffOut(BaseModel):
    agent: str
    level: int = Field(description="Steps down from normal")
    cap: int = Field(description="The lowered concurrency of the agent type")
    not_before: float = Field(description="No start of the type before this (epoch seconds)")
    holding: bool
    successes: int
    since: float
    reason: str | None
    reset_at: float | None = Field(
        None,
        description="When the provider said its limit resets; after it, one run probes first",
    )
