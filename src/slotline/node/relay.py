"""The claim made in the thread where a function's run ended (a relay).

A sync function runs in a worker thread. Its end would otherwise hop to the node's loop,
wake the loop, hop to another thread for the claim that commits it and refills its slot,
and hop back to start what that claim took: four hand-overs between threads for each
run. When the function simply returned (nothing to keep, no stop asked) and no other
claim of this node is under way, the thread that ran it makes that claim itself; the
loop only starts what the claim took. When another claim is under way, the end goes to
the loop's next claim as before, with the other ends of its turn (one commit for all).

The store's limits never depend on where a claim is made: every claim checks them under
the store's write lock. The node's lock here only keeps its own claims one at a time, so
that ends reported together stay together.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from slotline import fencing
from slotline.errors import SlotlineError
from slotline.store import ClaimResult, Report

log = logging.getLogger("slotline.node")

# Makes a claim that commits these ends (in the calling thread; the node's own lock held).
Claimer = Callable[[Sequence[Report]], ClaimResult]


@dataclass(frozen=True, slots=True)
class Relayed:
    """A claim made where a run ended: what it did, and when it was sent and had
    committed (`fencing.clock`), the deadline of the runs it started."""

    result: ClaimResult
    claimed: tuple[float, float]


class Relay:
    """A node's claims, one at a time: the loop's (`held`) and those made in the threads
    where runs ended (`claim`), which give way to any other."""

    def __init__(self, claimer: Claimer) -> None:
        self._claimer = claimer
        self._lock = threading.Lock()
        # Whether relays are made (the loop dispatches; not while the node stops).
        self.open = False
        # Claims made where a run ended, since the node started (read by tests and metrics).
        self.count = 0

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Around the loop's own claim (in its thread): a relay under way finishes first."""
        with self._lock:
            yield

    def claim(self, report: Report) -> Relayed | None:
        """Commit `report` with a claim made here (a run's worker thread); None when it
        cannot be (another claim is under way, the node stops, the store failed): the
        end then goes to the loop's next claim, nothing having been written."""
        if not self.open or not self._lock.acquire(blocking=False):
            return None
        try:
            if not self.open:
                return None
            sent = fencing.clock()
            try:
                result = self._claimer([report])
            except SlotlineError as exc:  # the loop's claim retries it
                log.debug("relay failed, the loop commits the end: %s", exc)
                return None
            self.count += 1
            return Relayed(result, (sent, fencing.clock()))
        finally:
            self._lock.release()
