"""The sections of slotline.yaml that pace starts: `rates`, `budgets`, `fairness`, and
an agent type's `backoff`, validated once, with the same checks as every other surface
(what a whole file declares of them, as the store takes it: `config/declared.py`)."""

from __future__ import annotations

from typing import Annotated

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from slotline.bounds import MAX_COUNT, SECONDS, Range
from slotline.errors import InvalidInput
from slotline.pacing import rates
from slotline.pacing.backoff import checked_pattern
from slotline.pacing.budgets import parse_budget
from slotline.scheduler.fairness import check_fairness


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
