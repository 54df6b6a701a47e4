"""The sections of slotline.yaml that pace starts: `rates`, `budgets`, `fairness`, and
an agent type's `backoff` (validated once, with the same checks as every other surface),
and the rates and budgets a file declares, as the store takes them."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from slotline.bounds import MAX_COUNT, SECONDS, Range, normalize_workspace
from slotline.errors import InvalidInput
from slotline.pacing import rates
from slotline.pacing.backoff import check_pattern
from slotline.pacing.budgets import parse_budget
from slotline.scheduler.fairness import check_fairness

if TYPE_CHECKING:
    from slotline.config.file import Config, LimitConfig
    from slotline.limits import Limit
    from slotline.pacing.budgets import Budget
    from slotline.pacing.rates import RateLimit


class RateConfig(BaseModel):
    """At most N starts per period (`rate: 20/1m`) per value of `key` (or of `value`)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    value: str | None = None
    rate: str

    @field_validator("key")
    @classmethod
    def _key(cls, key: str) -> str:
        return _limit_key(key, "rate key")

    @field_validator("rate")
    @classmethod
    def _rate(cls, rate: str) -> str:
        try:
            rates.parse_rate(rate)
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
        return rate


def _limit_key(key: str, kind: str) -> str:
    """A rate's or budget's key (the keys rate limits take), for a validator."""
    try:
        return rates.check_rate_key(key)
    except InvalidInput as exc:
        raise ValueError(str(exc).replace("rate key", kind)) from None


class BudgetConfig(BaseModel):
    """At most so much spend of finished runs per period (`budget: 50usd/1d`, or tokens
    in and out: `2Mtok/1h`) per value of `key` (or of `value`)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    value: str | None = None
    budget: str

    @field_validator("key")
    @classmethod
    def _key(cls, key: str) -> str:
        return _limit_key(key, "budget key")

    @field_validator("budget")
    @classmethod
    def _budget(cls, budget: str) -> str:
        return check_budget_text(budget)


def check_budget_text(budget: str) -> str:
    """A budget as slotline.yaml spells it (`50usd/1d`), checked for a validator."""
    try:
        parse_budget(budget)
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return budget


class BackoffConfig(BaseModel):
    """Provider back-off of an agent type: which failures mean "rate limited" (an exit
    code, or a regex found in the run's output) and how hard to back off."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    exit_codes: list[int] = Field(default_factory=list)
    pattern: str | None = None
    delay: Annotated[float, SECONDS] = 30.0
    max_delay: Annotated[float, SECONDS] = 900.0
    min_concurrent: Annotated[int, Range(1, MAX_COUNT, whole=True)] = 1
    recover_after: Annotated[int, Range(1, MAX_COUNT, whole=True)] = 1
    max_requeues: Annotated[int, Range(0, 1000, whole=True)] = 5

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, pattern: str | None) -> str | None:
        return checked_pattern(pattern)

    @pydantic.model_validator(mode="after")
    def _something_to_match(self) -> BackoffConfig:
        if not self.exit_codes and not self.pattern:
            raise ValueError("give exit_codes, a pattern, or both")
        if self.max_delay < self.delay:
            raise ValueError("max_delay must not be less than delay")
        return self


class FairnessConfig(BaseModel):
    """Fair dispatch between the values of `key` within a priority level; a value's
    weight is its share of turns (1 if not named)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    key: str
    weights: dict[str, float] = Field(default_factory=dict)

    @field_validator("key")
    @classmethod
    def _key(cls, key: str) -> str:
        try:
            return check_fairness(key).key
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None

    @field_validator("weights")
    @classmethod
    def _weights(cls, weights: dict[str, float]) -> dict[str, float]:
        for value, weight in weights.items():
            if not 0 < weight <= 1000:
                raise ValueError(f"the weight of {value!r} must be more than 0, at most 1000")
        return weights


def checked_pattern(pattern: str | None) -> str | None:
    """A pattern matched against a run's output (back-off, stall): RE2 syntax, as a
    configuration check (ValueError, which the loader turns into file, line and key)."""
    if pattern is not None:
        try:
            check_pattern(pattern)
        except InvalidInput as exc:
            raise ValueError(str(exc).removeprefix("backoff: ")) from None
    return pattern


def _declared(config: Config, what: str) -> list[tuple[str, str, str | None, str]]:
    """What the file declares of `what` (`limit`, `rate`, `budget`), in its own list and as
    agent types' own, each as (where in the file, key, value, as written)."""
    lists: dict[str, Sequence[LimitConfig | RateConfig | BudgetConfig]] = {
        "limit": config.limits,
        "rate": config.rates,
        "budget": config.budgets,
    }
    listed = lists[what]
    found = [
        (
            f"{what}s[{i}]",
            rule.key,
            rule.value,
            str(getattr(rule, "max" if what == "limit" else what)),
        )
        for i, rule in enumerate(listed)
    ]
    field = "max_concurrent" if what == "limit" else what
    for name, agent in config.agents.items():
        given = getattr(agent, field)
        if given is None:
            continue
        if isinstance(given, list):  # several budget windows
            found += [
                (f"agents.{name}.{field}[{i}]", "agent", name, g) for i, g in enumerate(given)
            ]
        else:
            found.append((f"agents.{name}.{field}", "agent", name, str(given)))
    return found


def declared_rates(config: Config) -> list[RateLimit]:
    """The rate limits the file declares: `rates:` and each agent type's `rate:`."""
    from slotline.pacing.rates import parse_rate
    from slotline.store.rates import check_rate

    return [check_rate(k, v, *parse_rate(rate)) for _, k, v, rate in _declared(config, "rate")]


def declared_limits(config: Config) -> list[Limit]:
    """The per-key limits the file declares: `limits:` and each agent type's
    `max_concurrent`."""
    from slotline.store.settings import check_limit

    return [check_limit(k, v, int(most)) for _, k, v, most in _declared(config, "limit")]


def declared_budgets(config: Config) -> list[Budget]:
    """The budgets the file declares: `budgets:` and each agent type's `budget:` (one,
    or a list of several windows and units)."""
    from slotline.store.budgets import check_budget

    declared = []
    for _, key, value, budget in _declared(config, "budget"):
        amount, unit, period = parse_budget(budget)
        declared.append(check_budget(key, value, amount, period, unit))
    return declared


def check_declared_once(config: Config) -> None:
    """Refuse a per-key limit, rate or budget window that the file gives two values (in
    its own list, or there and as an agent type's own): one of the two would be left
    unused without a word. The same value twice is no conflict.

    Raises:
        ValueError: what disagrees, and where (the loader adds the file).
    """
    for what in ("limit", "rate", "budget"):
        first: dict[tuple[str, ...], tuple[str, str]] = {}
        for where, key, value, given in _declared(config, what):
            ident: tuple[str, ...] = (key, _spelled(key, value))
            if what == "budget":
                ident += _window(given)
            earlier = first.setdefault(ident, (where, given))
            if _amount(what, earlier[1]) != _amount(what, given):
                of = ident[1] or "each value"
                raise ValueError(
                    f"{earlier[0]} and {where} give the {what} of {key}={of}{_window_text(ident)}"
                    f" two values ({earlier[1]} and {given}); keep one"
                )


def _spelled(key: str, value: str | None) -> str:
    """A rule's value as the store keeps it (`/w/ws/` and `/w/ws` are one workspace), ""
    for every value; one the store would refuse stays as written (`serve` says why)."""
    if key in ("workspace", "repo") and value:
        with contextlib.suppress(InvalidInput):
            return normalize_workspace(value)
    return value or ""


def _window(budget: str) -> tuple[str, str]:
    """A budget's unit and period, as the identity of its window."""
    _, unit, period = parse_budget(budget)
    return unit, rates.format_period(period)


def _window_text(ident: tuple[str, ...]) -> str:
    return f" in {ident[2]} per {ident[3]}" if len(ident) == 4 else ""


def _amount(what: str, value: str) -> object:
    """A declared value as it is compared: `20/1m` and `20/60s` are one rate."""
    if what == "rate":
        return rates.parse_rate(value)
    if what == "budget":
        return parse_budget(value)[0]
    return value
