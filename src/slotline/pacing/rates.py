"""Rate limits: at most N starts per period for a limit key, as pure values.

A rule (`RateLimit`) caps the starts of the tasks whose `key` has a value (every value
counted apart when the rule names none; a named rule beats a generic one, as for the
concurrency limits). `RateBook` holds the rules and the recent starts of every (key,
value) they count, and answers the one question the policy asks: when may this task
start? The store fills a book from its `rate_starts` rows inside the claim transaction;
the ETA simulation plays starts into a copy of it.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right, insort
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from slotline.bounds import MAX_COUNT, MAX_SECONDS, Range, normalize_workspace
from slotline.errors import InvalidInput
from slotline.limits import GLOBAL, check_limit_key

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PERIOD = re.compile(r"^(?P<n>\d+(?:\.\d+)?)?\s*(?P<unit>[smhd])?$")
_RATE = re.compile(r"^\s*(?P<max>[^/\s]+)\s*/\s*(?P<period>\S+)\s*$")


class Keyed(Protocol):
    def key_value(self, key: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most `max_starts` starts in any `period` seconds of the tasks whose `key` is
    `value` (each value apart if None). `origin` says who set it: `config`
    (slotline.yaml owns it) or `api` (set at run time)."""

    key: str
    value: str | None
    max_starts: int
    period: float
    origin: str = field(default="api", compare=False)

    @property
    def rate(self) -> str:
        """The rule as `slotline limits` spells it: `20/1m`."""
        return f"{self.max_starts}/{format_period(self.period)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "value": self.value,
            "max": self.max_starts,
            "period": self.period,
            "rate": self.rate,
            "origin": self.origin,
        }


def check_rate_key(key: str) -> str:
    """A rate key: `global`, or a limit key (agent, workspace, user, label:NAME).

    Raises:
        InvalidInput: any other key.
    """
    if key == GLOBAL:
        return key
    try:
        return check_limit_key(key)
    except InvalidInput:
        raise InvalidInput(
            f"unknown rate key {key!r}; use global, agent, workspace, user or label:NAME"
        ) from None


def parse_period(text: str | float) -> float:
    """`30s`, `1m`, `2h`, `1d`, `m` (one minute) or a number of seconds.

    Raises:
        InvalidInput: not a duration, or not more than 0 (at most ten years).
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        seconds = float(text)
    else:
        match = _PERIOD.match(str(text).strip().lower())
        if match is None or not (match["n"] or match["unit"]):
            raise InvalidInput(f"{text!r} is not a period; use e.g. 30s, 1m, 2h or 1d")
        seconds = float(match["n"] or 1) * _UNITS[match["unit"] or "s"]
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_SECONDS:
        raise InvalidInput(f"a rate's period must be more than 0s (at most ten years): {text!r}")
    return seconds


def format_period(seconds: float) -> str:
    for unit in ("d", "h", "m"):
        size = _UNITS[unit]
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def check_max_starts(value: object) -> int:
    """The N of `N/period`: a whole number from 1 (a cap of 0 starts is a concurrency
    limit of 0: `limits --set agent[x]=0`).

    Raises:
        InvalidInput: anything else.
    """
    if isinstance(value, float):
        raise InvalidInput(f"a rate's count must be a whole number, got {value!r}")
    return int(Range(1, MAX_COUNT, whole=True).check("a rate's count", value))


def parse_rate(text: str) -> tuple[int, float]:
    """`20/1m` → (20, 60.0).

    Raises:
        InvalidInput: not N/PERIOD with N ≥ 1 and a period more than 0.
    """
    match = _RATE.match(text)
    if match is None:
        raise InvalidInput(f"{text!r} is not a rate; use N/PERIOD, e.g. 20/1m or 1000/1d")
    return check_max_starts(match["max"]), parse_period(match["period"])


class RateBook:
    """The rate rules and the recent starts they count, per (key, value), oldest first."""

    def __init__(
        self,
        rules: Sequence[RateLimit],
        starts: Mapping[tuple[str, str], Iterable[float]] | None = None,
    ) -> None:
        self.rules = tuple(rules)
        self.keys = sorted({rule.key for rule in self.rules})
        self.starts: dict[tuple[str, str], list[float]] = {
            pair: sorted(times) for pair, times in (starts or {}).items()
        }

    def __bool__(self) -> bool:
        return bool(self.rules)

    def copy(self) -> RateBook:
        return RateBook(self.rules, self.starts)

    def rule_for(self, key: str, value: str) -> RateLimit | None:
        """The rule that counts `value` of `key`: a named one beats a generic one."""
        generic = None
        for rule in self.rules:
            if rule.key != key:
                continue
            if rule.value == value or (key == GLOBAL and rule.value in (None, "")):
                return rule
            if rule.value is None:
                generic = rule
        return generic

    def counted(self, task: Keyed) -> list[tuple[str, str]]:
        """The (key, value) pairs a start of `task` counts under (what the store records)."""
        pairs = []
        for key in self.keys:
            value = task.key_value(key)
            if value is not None and self.rule_for(key, value) is not None:
                pairs.append((key, value))
        return pairs

    def next_allowed(self, task: Keyed, now: float) -> float | None:
        """When `task` may start under every rate that counts it: None if now, else the
        earliest instant every one of them has room again."""
        latest = None
        for key, value in self.counted(task):
            rule = self.rule_for(key, value)
            assert rule is not None
            at = self._room_at(rule, self.starts.get((key, value), ()), now)
            if at is not None and (latest is None or at > latest):
                latest = at
        return latest

    @staticmethod
    def _room_at(rule: RateLimit, starts: Sequence[float], now: float) -> float | None:
        # The window is (now - period, now]: a start at s counts until s + period.
        first = bisect_right(starts, now - rule.period)
        used = len(starts) - first
        if used < rule.max_starts:
            return None
        return starts[len(starts) - rule.max_starts] + rule.period

    def record(self, task: Keyed, at: float) -> None:
        """Count a start of `task` at `at`."""
        for pair in self.counted(task):
            insort(self.starts.setdefault(pair, []), at)

    def status(self, now: float) -> list[dict[str, Any]]:
        """Each rule in force, and for each value it has counted lately: how many starts
        the window holds and when the next start is allowed (None: now)."""
        shown: list[dict[str, Any]] = []
        for rule in self.rules:
            values = [rule.value or ""] if rule.value is not None or rule.key == GLOBAL else []
            if rule.value is None and rule.key != GLOBAL:
                values = sorted(
                    v for (k, v) in self.starts
                    if k == rule.key and self.rule_for(k, v) is rule
                )  # fmt: skip
            per_value = rule.value is None and rule.key != GLOBAL
            if not values:
                shown.append(
                    {**rule.to_dict(), "per_value": per_value, "used": 0, "next_start_at": None}
                )
            for value in values:
                starts = self.starts.get((rule.key, value), [])
                used = len(starts) - bisect_right(starts, now - rule.period)
                shown.append(
                    {
                        **rule.to_dict(),
                        "value": rule.value if rule.value is not None else value or None,
                        "per_value": per_value,
                        "used": used,
                        "next_start_at": self._room_at(rule, starts, now),
                    }
                )
        return shown


def windows(rules: Sequence[RateLimit]) -> dict[str, float]:
    """How far back the starts of each key are needed: its longest period."""
    found: dict[str, float] = {}
    for rule in rules:
        found[rule.key] = max(found.get(rule.key, 0.0), rule.period)
    return found


def check_rate(key: str, value: str | None, max_starts: object, period: object) -> RateLimit:
    """A rule as every surface checks it.

    Raises:
        InvalidInput: an unknown key, an empty value, a count below 1 or a period not
            more than 0.
    """
    check_rate_key(key)
    if value is not None and not value:
        raise InvalidInput("a rate's value must not be empty")
    if value is not None and "\x00" in value:
        raise InvalidInput("a rate's value must not contain NUL bytes")
    if key == GLOBAL and value is not None:
        raise InvalidInput("the global rate takes no value")
    if key == "workspace" and value is not None:
        value = normalize_workspace(value)
    seconds = parse_period(period if isinstance(period, int | float | str) else str(period))
    return RateLimit(key, value, check_max_starts(max_starts), seconds)
