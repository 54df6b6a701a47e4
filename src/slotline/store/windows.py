"""The run times a store's claims measure, written to their windows (`run_times`) in
groups: at most once every FLUSH_EVERY seconds of the store's clock while the claims keep
starting work, and by the first claim that starts nothing (the line ran dry, or its
slots are full), so that an idle line's estimates are never behind.

A claim used to read, fit and rewrite two or three windows (all tasks', the agent
type's, the dispatch gap's) each time it ended a run: a fifth of its Python and three
statements in a drain. Now a drain of hundreds of claims a second writes each window
about once a second. What a claim measured joins the store object's pending samples
only once its transaction committed, and what a claim took to write is given back if
its transaction fails, so no run is counted twice or lost by a failed claim. What a
kill -9 loses is at most the pending second of samples: estimates, never a task's state.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence

from slotline.models import Task
from slotline.store.estimates import ALL, GAP, add_samples
from slotline.store.queries import Tx
from slotline.store.statements import Read

# Seconds of the store's clock between two writes of the windows while claims start work.
FLUSH_EVERY = 1.0
# A gap longer than this is a line that was idle, not a slot waiting to be refilled.
MAX_GAP = 5.0
# The latest finishes a claim reads for its dispatch gap (a claim of more starts measures
# the gap of this many).
GAP_FINISHES = 64

Scope = tuple[str, str]
Samples = dict[Scope, list[float]]


class Pending:
    """The samples a store's committed claims measured and no claim wrote yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: Samples = {}
        self._written_at = -math.inf

    def due(self, now: float, adding: bool) -> bool:
        """Whether a claim at `now` that measures something (`adding`) writes the windows
        whatever it starts: samples wait and the last write is FLUSH_EVERY old (or the
        clock went back)."""
        with self._lock:
            if not (adding or self._samples):
                return False
            return not self._written_at <= now < self._written_at + FLUSH_EVERY

    def scopes(self, adding: Iterable[Scope]) -> list[Scope]:
        """The windows a write of the pending samples and of `adding` changes."""
        with self._lock:
            return sorted({*self._samples, *adding})

    def next_write(self, waiting: bool = False) -> float | None:
        """When the claims should write the samples pending, or about to be (`waiting`):
        None if none are."""
        with self._lock:
            return self._written_at + FLUSH_EVERY if self._samples or waiting else None

    def _take(self, now: float) -> tuple[Samples, float]:
        with self._lock:
            taken = (self._samples, self._written_at)
            self._samples, self._written_at = {}, now
            return taken

    def _give_back(self, taken: tuple[Samples, float]) -> None:
        samples, written_at = taken
        with self._lock:
            self._samples = merged(samples, self._samples)
            self._written_at = written_at

    def _add(self, samples: Samples) -> None:
        if samples:
            with self._lock:
                self._samples = merged(self._samples, samples)


class Claiming:
    """What one claim does with the pending samples: it writes them with its own
    (`write`), or leaves its own to a later claim (`keep`); `settle` then says whether
    it committed."""

    def __init__(self, pending: Pending) -> None:
        self._pending = pending
        self._taken: tuple[Samples, float] | None = None
        self._kept: Samples = {}

    def write(self, tx: Tx, samples: Samples, now: float) -> None:
        """Write the pending samples and `samples` in `tx`, a claim's at `now`."""
        self._taken = self._pending._take(now)
        write(tx, merged(self._taken[0], samples), now)

    def keep(self, samples: Samples) -> None:
        """Leave `samples` to a later claim, once this one commits."""
        self._kept = samples

    def next_write(self) -> float | None:
        """When a later claim should write what this one left (None: nothing is left)."""
        return None if self._taken is not None else self._pending.next_write(bool(self._kept))

    def settle(self, committed: bool) -> None:
        """After the claim's transaction: what it measured joins the pending samples if
        it committed and did not write them; what it took is given back if it failed."""
        if committed:
            self._pending._add(self._kept)
        elif self._taken is not None:
            self._pending._give_back(self._taken)


def measured(runs: Iterable[tuple[str | None, float]], gap: float | None) -> Samples:
    """The samples of a claim that ended `runs` (agent type, seconds) and refilled slots
    after `gap` seconds, by window."""
    found: Samples = {}
    for agent, seconds in runs:
        if not math.isfinite(seconds) or seconds < 0:
            continue
        if agent is not None:
            found.setdefault(("agent", agent), []).append(seconds)
        found.setdefault(ALL, []).append(seconds)
    if gap is not None:
        found[GAP] = [gap]
    return found


def merged(first: Mapping[Scope, list[float]], then: Mapping[Scope, list[float]]) -> Samples:
    """The samples of `first`, then those of `then`, by window."""
    found = {scope: list(values) for scope, values in first.items()}
    for scope, values in then.items():
        found.setdefault(scope, []).extend(values)
    return found


def write(tx: Tx, samples: Mapping[Scope, list[float]], now: float) -> None:
    """Add `samples` to their windows: one read and one write per window."""
    for scope, values in sorted(samples.items()):
        add_samples(tx, scope, values, now)


def reads(scopes: Iterable[Scope], now: float) -> list[Read]:
    """What a claim at `now` reads ahead: the windows `scopes` (those it writes, if its
    write is due), and the latest finishes its dispatch gap may need (`gap`)."""
    windows = [Read("run_time_get", {"scope": kind, "name": name}) for kind, name in scopes]
    return [*windows, Read("finishes_before", _finishes(now))]


def gap(tx: Tx, claimed: Sequence[Task], now: float, ended_now: int) -> float | None:
    """How long, on average, the slots the tasks `claimed` at `now` refill stood empty.
    The claims took the slots of the latest finishes, one each (of the last
    `GAP_FINISHES` at most); a slot counts as waiting from its finish, or from when its
    task was queued if that was later (an idle slot waits for no dispatch). `ended_now`:
    how many runs the claim itself ended at `now`, which are the latest finishes: when
    they are as many as the claims, the finishes need not be read."""
    queued = sorted(now if t.queued_at is None else t.queued_at for t in claimed)
    if not queued:
        return None
    if ended_now >= len(queued):
        ends = [now] * len(queued)
    else:
        latest = tx.rows("finishes_before", **_finishes(now))[: len(queued)]
        ends = sorted(float(r["at"]) for r in latest)
    gaps = [now - max(end, q) for end, q in zip(ends, queued[-len(ends) :], strict=False)]
    return sum(gaps) / len(gaps) if gaps else None


def _finishes(now: float) -> dict[str, float | int]:
    return {"since": now - MAX_GAP, "now": now, "n": GAP_FINISHES}
