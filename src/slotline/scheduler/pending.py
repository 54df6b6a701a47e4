"""The queued tasks of an ETA simulation (`eta.py`), grouped by limit class, each class
in queue order: which could start when slots free, read without sorting the line again."""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from slotline.scheduler import policy

if TYPE_CHECKING:
    from slotline.scheduler.lineup import Entry

_Key = tuple[object, ...]


def _class_of(task: Entry, limits: policy.Limits, keys: Sequence[str]) -> tuple[object, ...]:
    return (limits.in_pool(task), *(task.key_value(k) for k in keys))


class Pending:
    """Queued tasks grouped by class, each class in queue order."""

    def __init__(
        self,
        limits: policy.Limits,
        now: float,
        aging: float | None,
        rated: Sequence[str] = (),
        fair: Mapping[str, float] | None = None,
    ) -> None:
        self.limits = limits
        self.fair = fair
        # Tasks of one class must be alike for every cap: the limits', the rates' and
        # (for a back-off hold) the agent type.
        self.keys = sorted({limit.key for limit in limits.per_key} | set(rated))
        self.now = now
        self.aging = aging
        self.classes: dict[tuple[object, ...], list[tuple[_Key, Entry]]] = {}
        self.heads: dict[tuple[object, ...], int] = {}
        self.class_of: dict[str, tuple[object, ...]] = {}

    def add(self, task: Entry) -> None:
        cls = self._class(task)
        members = self.classes.setdefault(cls, [])
        key: _Key = policy.queue_key(task, self.now, self.aging)
        if self.fair is not None:
            key = (key[0], key[1], self.fair.get(task.id, math.inf), task.rank)
        if not members or members[-1][0] <= key:  # the line is read in order: append
            members.append((key, task))
        else:
            lo = self.heads.setdefault(cls, 0)
            insort(members, (key, task), lo=lo, key=lambda m: m[0])
        self.heads.setdefault(cls, 0)

    def _class(self, task: Entry) -> tuple[object, ...]:
        cls = self.class_of.get(task.id)
        if cls is None:
            cls = self.class_of[task.id] = _class_of(task, self.limits, self.keys)
        return cls

    def candidates(self, free_in_pool: int) -> list[Entry]:
        """In queue order, every task that could start with `free_in_pool` slots free."""
        found: list[tuple[_Key, Entry]] = []
        for cls, members in self.classes.items():
            head = self.heads[cls]
            if head >= len(members):
                continue
            take = free_in_pool if cls[0] else self._cap(cls)
            found.extend(members[head : head + take])
        found.sort(key=lambda m: m[0])
        return [task for _key, task in found]

    def _cap(self, cls: tuple[object, ...]) -> int:
        caps = [
            cap
            for key, value in zip(self.keys, cls[1:], strict=True)
            if value is not None and (cap := self.limits.for_value(key, str(value))) is not None
        ]
        return min(caps) if caps else len(self.classes[cls])

    def started(self, task: Entry) -> None:
        # Tasks of one class start in their order, so a start is always the class's head.
        self.heads[self._class(task)] += 1

    def empty(self) -> bool:
        return all(self.heads[c] >= len(m) for c, m in self.classes.items())
