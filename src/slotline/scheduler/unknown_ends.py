"""The runs of an ETA simulation (`eta.py`) whose end is unknown, and the starts that
rest on one: nothing says how long such a run takes, so what waits for the slot it frees
cannot be given a time either."""

from __future__ import annotations

from collections.abc import Iterable

from slotline.scheduler import policy
from slotline.scheduler.lineup import Entry

# A cap on running tasks: the pool (None) or a per-key limit's (key, value).
Cap = tuple[str, str] | None


class UnknownEnds:
    """The runs of the simulation whose end is unknown (nothing says how long they take,
    or their start was unknown), and the starts that rest on one. Such an end frees the
    caps it counted against that were full (the pool, a per-key limit of its values):
    from then on a start that counts against one of them could happen at any time, and
    is unknown too; other starts are not held by it. So is the start of a task that
    waited for such a run (a dependency). A task started at an unknown time that fills
    the pool makes every later start in the pool unknown."""

    def __init__(self) -> None:
        self.ends: dict[str, str] = {}  # run id -> why its end is unknown
        self.caps: dict[Cap, tuple[float, str]] = {}  # cap -> (from when, why)
        self.waiters: dict[str, str] = {}

    def ended(
        self, done: Entry, clock: float, running: Iterable[Entry], limits: policy.Limits
    ) -> None:
        why = self.ends.get(done.id)
        if why is not None and not (None in self.caps and not limits.per_key):
            for cap in _full_caps(done, running, limits):
                self.caps.setdefault(cap, (clock, _after(why)))

    def waited(self, done: Entry, waiter: Entry) -> None:
        why = self.ends.get(done.id)
        if why is not None:
            self.waiters.setdefault(waiter.id, _after(why))

    def started(
        self, task: Entry, clock: float, running: Iterable[Entry], limits: policy.Limits
    ) -> None:
        """`task` started at `clock`, standing for an unknown time: if it filled the pool,
        the pool's next starts are unknown."""
        if None in self.caps:  # the pool's starts are unknown from an earlier time
            return
        if limits.in_pool(task) and None in _full_caps(task, running, limits):
            self.caps[None] = (clock, self.ends[task.id])

    def before(self, task: Entry, clock: float, limits: policy.Limits) -> str | None:
        """Why the start of `task` at `clock` is unknown, or None if it is known."""
        for cap, (at, why) in self.caps.items():
            counts = limits.in_pool(task) if cap is None else task.key_value(cap[0]) == cap[1]
            if clock >= at and counts:
                return why
        return self.waiters.get(task.id)


def _after(why: str) -> str:
    if why.startswith("starts after"):
        return why
    return f"starts after a run whose length is unknown ({why})"


def _full_caps(done: Entry, running: Iterable[Entry], limits: policy.Limits) -> list[Cap]:
    """The caps `done` counts against that are full with `running` (which holds it): its
    end frees a place some task may be waiting for."""
    running = list(running)
    found: list[Cap] = []
    in_pool = sum(1 for t in running if limits.in_pool(t))
    if limits.in_pool(done) and in_pool >= limits.max_concurrent:
        found.append(None)
    for key in sorted({limit.key for limit in limits.per_key}):
        value = done.key_value(key)
        cap = None if value is None else limits.for_value(key, value)
        if cap is not None and sum(1 for t in running if t.key_value(key) == value) >= cap:
            found.append((key, str(value)))
    return found
