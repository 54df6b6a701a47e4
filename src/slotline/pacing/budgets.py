"""Budgets: at most so much spend of finished runs in a trailing window per limit key,
as pure values.

A rule (`Budget`) caps the spend, in US dollars (`50usd/1d`) or in
tokens in and out (`2Mtok/1h`), of the runs that finished in the last `period` seconds
among the tasks whose `key` has a value (every value counted apart when the rule names
none; a named value's rules of a unit replace the generic ones of that unit, as for the
rate limits). A key may hold several windows of one unit (`10usd/1h` and `100usd/1d`):
each holds on its own, and a task starts only when every one of them has room.
`BudgetBook` holds the rules and the spend of every (key, value) they count, and answers
the question the policy asks: until when is this task held? Spend only grows when a run
finishes, so nothing a claim starts changes the book: a budget stops new starts once
reached, and runs in flight finish.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from slotline.bounds import MAX_COUNT, Range, normalize_workspace
from slotline.errors import InvalidInput
from slotline.limits import GLOBAL
from slotline.pacing.rates import Keyed, check_rate_key, format_period, parse_period

USD = "usd"
TOKENS = "tok"
UNITS = (USD, TOKENS)
# The most a budget may be: a billion dollars, or a trillion tokens.
_MAX = {USD: float(MAX_COUNT), TOKENS: float(MAX_COUNT) * 1000}
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000, "b": 1_000_000_000}
_AMOUNT = re.compile(
    r"^\s*(?:\$\s*(?P<dollars>\d+(?:\.\d+)?)|(?P<n>\d+(?:\.\d+)?)\s*"
    r"(?:(?P<usd>usd|\$)|(?P<scale>[kmgb]?)\s*(?P<tok>tok|tokens?)))\s*$",
    re.IGNORECASE,
)
# Sums of float dollars are compared with this much slack (three runs of $0.10 reach a
# budget of $0.30).
_EPSILON = 1e-9


@dataclass(frozen=True, slots=True)
class Budget:
    """At most `amount` (`unit`: usd or tok) spent by the runs that finished in any
    `period` seconds of the tasks whose `key` is `value` (each value apart if None).
    A budget is one (key, value, unit, period); `origin` says who set it: `config`
    (slotline.yaml owns it) or `api` (set at run time)."""

    key: str
    value: str | None
    amount: float
    unit: str
    period: float
    origin: str = field(default="api", compare=False)

    @property
    def budget(self) -> str:
        """The rule as `slotline limits` spells it: `50usd/1d`, `2Mtok/1h`."""
        return f"{format_amount(self.amount, self.unit)}/{format_period(self.period)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": self.value,
            "amount": self.amount,
            "unit": self.unit,
            "period": self.period,
            "budget": self.budget,
            "origin": self.origin,
        }


class Reached(NamedTuple):
    """Which budget a value has reached: the value ('' for the global one) and the
    budget's unit and window."""

    key: str
    value: str
    unit: str
    period: float


class Spend(NamedTuple):
    """What one finished run spent, when it finished."""

    at: float
    cost_usd: float
    tokens: int

    def of(self, unit: str) -> float:
        return self.cost_usd if unit == USD else float(self.tokens)


def format_amount(amount: float, unit: str) -> str:
    """`50usd`, `0.5usd`, `2Mtok`, `1500ktok`, `123tok`."""
    if unit == USD:
        return f"{amount:.12g}usd"
    whole = int(amount)
    for suffix, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if whole >= size and whole % size == 0:
            return f"{whole // size}{suffix}tok"
    return f"{whole}tok"


def parse_amount(text: str) -> tuple[float, str]:
    """`50usd`, `$50`, `0.5usd` → (50.0, "usd"); `2Mtok`, `500ktok`, `1000 tokens` →
    (2000000.0, "tok"). Tokens are whole numbers, counted in and out together.

    Raises:
        InvalidInput: not an amount of one of those units, not more than 0, or too large.
    """
    match = _AMOUNT.match(text)
    if match is None:
        raise InvalidInput(
            f"{text!r} is not a budget amount; use dollars (50usd, $0.5) or tokens "
            "(2Mtok, 500ktok, 1000tok)"
        )
    if match["tok"]:
        amount, unit = float(match["n"]) * _SCALE[match["scale"].lower()], TOKENS
        if amount != int(amount):
            raise InvalidInput(f"a token budget is a whole number of tokens, not {text!r}")
    else:
        amount, unit = float(match["dollars"] or match["n"]), USD
    return check_amount(amount, unit), unit


def check_amount(amount: object, unit: str) -> float:
    """The amount of a budget in `unit`: more than 0, at most a billion dollars or a
    trillion tokens (whole).

    Raises:
        InvalidInput: anything else, or an unknown unit.
    """
    if unit not in UNITS:
        raise InvalidInput(f"unknown budget unit {unit!r}; use usd or tok")
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        raise InvalidInput(f"a budget's amount must be a number, not {amount!r}")
    value = float(amount)
    if not math.isfinite(value) or value <= 0 or value > _MAX[unit]:
        words = Range(0, _MAX[unit], above=True).words()
        raise InvalidInput(f"a budget must be {words} {unit}, got {amount!r}")
    if unit == TOKENS and value != int(value):
        raise InvalidInput(f"a token budget is a whole number of tokens, not {amount!r}")
    return value


def parse_budget(text: str) -> tuple[float, str, float]:
    """`50usd/1d` → (50.0, "usd", 86400.0); `2Mtok/1h` → (2000000.0, "tok", 3600.0).

    Raises:
        InvalidInput: not AMOUNT/PERIOD with an amount as `parse_amount` reads it and a
            period as the rates read it.
    """
    amount, sep, period = text.rpartition("/")
    if not sep or not amount.strip():
        raise InvalidInput(f"{text!r} is not a budget; use AMOUNT/PERIOD, e.g. 50usd/1d, 2Mtok/1h")
    return (*parse_amount(amount), parse_period(period.strip()))


class BudgetBook:
    """The budget rules and the spend they count, per (key, value), oldest first."""

    def __init__(
        self,
        rules: Sequence[Budget],
        spends: Mapping[tuple[str, str], Iterable[Spend]] | None = None,
    ) -> None:
        self.rules = tuple(rules)
        self.keys = sorted({rule.key for rule in self.rules})
        self.spends: dict[tuple[str, str], list[Spend]] = {
            pair: sorted(items) for pair, items in (spends or {}).items()
        }

    def __bool__(self) -> bool:
        return bool(self.rules)

    @classmethod
    def of_runs(cls, rules: Sequence[Budget], runs: Iterable[tuple[Keyed, Spend]]) -> BudgetBook:
        """A book of the finished runs given as (task, spend): each spend counted under
        every (key, value) of its task that a rule counts."""
        book = cls(rules)
        for task, spend in runs:
            for pair in book.counted(task):
                book.spends.setdefault(pair, []).append(spend)
        for items in book.spends.values():
            items.sort()
        return book

    def rules_for(self, key: str, value: str) -> list[Budget]:
        """The rules that count `value` of `key`, shortest window first within a unit:
        the rules that name `value` of a unit, or else the generic ones of that unit."""
        found: list[Budget] = []
        for unit in UNITS:
            mine = [r for r in self.rules if r.key == key and r.unit == unit]
            named = [r for r in mine if r.value == value or key == GLOBAL]
            found += sorted(named or [r for r in mine if r.value is None], key=_by_period)
        return found

    def counted(self, task: Keyed) -> list[tuple[str, str]]:
        """The (key, value) pairs whose budgets count the spend of `task`."""
        pairs = []
        for key in self.keys:
            value = task.key_value(key)
            if value is not None and self.rules_for(key, value):
                pairs.append((key, value))
        return pairs

    def held_until(self, task: Keyed, now: float) -> float | None:
        """None if no budget that counts `task` is reached at `now`; else the instant
        enough spend has aged out of every reached one for it to start."""
        latest = None
        for key, value in self.counted(task):
            for rule in self.rules_for(key, value):
                at = _frees_at(rule, self.spends.get((key, value), ()), now)
                if at is not None and (latest is None or at > latest):
                    latest = at
        return latest

    def reached_names(self, task: Keyed, now: float) -> list[str]:
        """The budgets that count `task` and are reached at `now`, by name
        (`agent[claude] 50usd/1d`, `global 100usd/1d`)."""
        names = []
        for key, value in self.counted(task):
            for rule in self.rules_for(key, value):
                if _frees_at(rule, self.spends.get((key, value), ()), now) is not None:
                    names.append(f"{key if key == GLOBAL else f'{key}[{value}]'} {rule.budget}")
        return names

    def spent(self, rule: Budget, value: str, now: float) -> float:
        """What the window of `rule` holds for `value` at `now`."""
        items = self.spends.get((rule.key, value), [])
        return math.fsum(s.of(rule.unit) for s in _window(items, rule.period, now))

    def state(self, now: float) -> list[dict[str, Any]]:
        """Each rule in force, and for each value it has counted lately: what its window
        holds (`spent`) and, if the budget is reached, when enough ages out (`until`;
        None: not reached)."""
        shown: list[dict[str, Any]] = []
        for rule in self.rules:
            per_value = rule.value is None and rule.key != GLOBAL
            if per_value:
                values = sorted(
                    v for (k, v) in self.spends
                    if k == rule.key and rule in self.rules_for(k, v)
                )  # fmt: skip
            else:
                values = [rule.value or ""]
            if not values:
                shown.append({**rule.to_dict(), "per_value": True, "spent": 0.0, "until": None})
            for value in values:
                items = self.spends.get((rule.key, value), [])
                shown.append(
                    {
                        **rule.to_dict(),
                        "value": rule.value if rule.value is not None else value or None,
                        "per_value": per_value,
                        "spent": self.spent(rule, value, now),
                        "until": _frees_at(rule, items, now),
                    }
                )
        return shown

    def reached(self, now: float) -> dict[Reached, dict[str, Any]]:
        """The budgets reached at `now`, by (key, value, unit, period), with what `state`
        says of each (value '' for the global one)."""
        return {
            Reached(s["key"], s["value"] or "", s["unit"], float(s["period"])): s
            for s in self.state(now)
            if s["until"] is not None
        }


def _by_period(rule: Budget) -> float:
    return rule.period


def _window(items: Sequence[Spend], period: float, now: float) -> Sequence[Spend]:
    # The window is (now - period, now]: a run finished at s counts until s + period.
    first = bisect_right(items, (now - period, math.inf, math.inf))
    return items[first:]


def _frees_at(rule: Budget, items: Sequence[Spend], now: float) -> float | None:
    """None if the window of `rule` holds less than its amount at `now`; else the instant
    enough of the oldest spend has left the window for it to hold less."""
    window = _window(items, rule.period, now)
    left = math.fsum(s.of(rule.unit) for s in window)
    if left < rule.amount - _EPSILON:
        return None
    for spend in window:
        left -= spend.of(rule.unit)
        if left < rule.amount - _EPSILON:
            return spend.at + rule.period
    return now + rule.period  # unreachable: the loop ends with nothing left


def check_period(period: object) -> float:
    """A budget's window in seconds, from seconds or `1h`, `1d`.

    Raises:
        InvalidInput: not a period, or not more than 0.
    """
    if isinstance(period, int | float | str) and not isinstance(period, bool):
        return parse_period(period)
    raise InvalidInput(f"a budget's period must be like 1h or 1d, not {period!r}")


def check_budget(key: str, value: str | None, amount: object, period: object, unit: str) -> Budget:
    """A rule as every surface checks it.

    Raises:
        InvalidInput: an unknown key or unit, an empty value, an amount not more than 0
            (or not whole, of tokens) or a period not more than 0.
    """
    check_rate_key(key)
    value = check_budget_value(key, value)
    return Budget(key, value, check_amount(amount, unit), unit, check_period(period))


def check_budget_value(key: str, value: str | None) -> str | None:
    """A budget's value as the store keeps it (a workspace or repo spelled as tasks store
    it), None for every value.

    Raises:
        InvalidInput: an empty or NUL-bearing value, or one given to the global budget.
    """
    if value is None:
        return None
    if not value or "\x00" in value:
        raise InvalidInput("a budget's value must not be empty nor hold NUL bytes")
    if key == GLOBAL:
        raise InvalidInput("the global budget takes no value")
    if key in ("workspace", "repo"):
        return normalize_workspace(value)  # the spelling tasks store
    return value
