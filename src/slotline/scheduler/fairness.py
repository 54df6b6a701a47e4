"""Fair dispatch between the values of a key (users, workspaces, agent types, parent
tasks, a label) within a priority level, as pure functions.

The rule (weighted round-robin by stride scheduling): each value v has a pass, its next
turn, which every start of one of its tasks advances by 1 / weight_v (the store keeps the
passes, table fair_passes, and the claim that starts a task advances them). In a band of
the line (same boost, same effective priority) the k-th queued task (k = 1, 2, …) of v
is due at turn max(pass_v, floor) + (k - 1) / weight_v, where `floor` is the lowest pass
among the band's values (a value new to the line, or back after a pause, starts there:
it never gets a burst of turns for the time it was away). The band is ordered by turn,
ties by rank. So each value's next task takes turns, a value of weight 2 gets two turns
per round, and bands keep their order: fairness never lets a lower priority pass a
higher one. `policy.order` and `policy.plan` apply it; positions, the claim and the ETAs
all read the line through it.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from slotline.errors import InvalidInput
from slotline.limits import check_limit_key

# A value's share of turns is at most this many times another's.
MAX_WEIGHT = 1000.0
# How far before the floor a value without a pass starts (a tie-break, not a turn).
NEWCOMER = 1e-9


class Fair(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def rank(self) -> str: ...
    def key_value(self, key: str) -> str | None: ...


F = TypeVar("F", bound=Fair)


@dataclass(frozen=True, slots=True)
class Fairness:
    """Fair dispatch between the values of `key`; a value's weight is 1 unless named."""

    key: str
    weights: Mapping[str, float] = field(default_factory=dict)

    def weight(self, value: str) -> float:
        return float(self.weights.get(value, 1.0))

    def value_of(self, task: Any) -> str:
        """The value `task` takes turns under ("" for a task without one)."""
        if self.key == "parent":
            found = getattr(task, "parent_id", None)
        else:
            found = task.key_value(self.key)
        return "" if found is None else str(found)

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "weights": dict(self.weights)}

    @classmethod
    def from_setting(cls, stored: Mapping[str, Any] | None) -> Fairness | None:
        """The fairness as stored in the settings (None: off)."""
        if not stored:
            return None
        return cls(str(stored["key"]), dict(stored.get("weights") or {}))


def check_fairness(key: str, weights: Mapping[str, object] | None = None) -> Fairness:
    """A fairness as every surface checks it.

    Raises:
        InvalidInput: an unknown key, or a weight not in (0, 1000].
    """
    if key != "parent":
        try:
            check_limit_key(key)
        except InvalidInput:
            raise InvalidInput(
                f"unknown fairness key {key!r}; use user, workspace, agent, parent or label:NAME"
            ) from None
    checked: dict[str, float] = {}
    for value, weight in (weights or {}).items():
        try:
            number = float(weight)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise InvalidInput(f"fairness: the weight of {value!r} must be a number") from None
        if not (math.isfinite(number) and 0 < number <= MAX_WEIGHT):
            raise InvalidInput(
                f"fairness: the weight of {value!r} must be more than 0, at most {MAX_WEIGHT:g}"
            )
        checked[str(value)] = number
    return Fairness(key, checked)


def turns(
    band: Iterable[F], fairness: Fairness, passes: Mapping[str, float]
) -> list[tuple[float, F]]:
    """One band of the line (tasks of one boost and priority, in rank order) in fair
    order, each task with its turn."""
    members = list(band)
    values = [fairness.value_of(task) for task in members]
    served = [passes[v] for v in set(values) if v in passes]
    floor = min(served) if served else 0.0
    seen: Counter[str] = Counter()
    keyed = []
    for task, value in zip(members, values, strict=True):
        known = passes.get(value)
        # A value without a pass (new, or forgotten) goes first among those at the floor:
        # it has not been served, they have.
        start = floor - NEWCOMER if known is None else max(known, floor)
        due = start + seen[value] / fairness.weight(value)
        seen[value] += 1
        keyed.append((due, task.rank, task))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [(due, task) for due, _rank, task in keyed]


def fair_line(
    line: Iterable[F],
    fairness: Fairness,
    passes: Mapping[str, float],
    band_of: Callable[[F], object],
    turns_of: dict[str, float] | None = None,
) -> Iterator[F]:
    """The line (in band order) with each band in fair order, read one band at a time:
    a reader that stops early reads the line only up to the end of that band. Each
    task's turn is put in `turns_of`, if given."""
    for _band, members in itertools.groupby(line, key=band_of):
        for due, task in turns(members, fairness, passes):
            if turns_of is not None:
                turns_of[task.id] = due
            yield task


def virtual_times(
    line: Iterable[F],
    fairness: Fairness,
    passes: Mapping[str, float],
    band_of: Callable[[F], object],
) -> dict[str, float]:
    """Each task's turn in its band, by id (the ETA simulation sorts by it)."""
    found: dict[str, float] = {}
    for _task in fair_line(line, fairness, passes, band_of, found):
        pass
    return found


def charged(
    passes: Mapping[str, float],
    fairness: Fairness,
    started: Iterable[tuple[Any, float | None]],
) -> dict[str, float]:
    """The passes after the starts of (task, its turn) pairs: each value's pass moves to
    its latest turn taken plus 1 / weight (a task started out of turn, by start-now, at
    its value's pass)."""
    moved: dict[str, float] = {}
    for task, due in started:
        value = fairness.value_of(task)
        current = moved.get(value, passes.get(value))
        turn = due if due is not None else (0.0 if current is None else current)
        new = turn + 1 / fairness.weight(value)
        moved[value] = new if current is None else max(current, new)
    return moved
