"""The claim made in the thread where a function's run ended (a relay).

A sync function runs in a worker thread. Its end would otherwise hop to the node's loop,
wake the loop, hop to another thread for the claim that commits it and refills its slot,
and hop back to start what that claim took: four hand-overs between threads for each
run. When the function simply returned (nothing to keep, no stop asked), it was the
node's only run and no other claim of this node is under way, the thread that ran it
makes that claim itself; the loop only starts what the claim took. Otherwise the end
goes to the loop's next claim as before, with the other ends of its turn (one commit
for all).

The store's limits never depend on where a claim is made: every claim checks them under
the store's write lock. The node's lock here only keeps its own claims one at a time, so
that ends reported together stay together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from slotline import fencing
from slotline.errors import SlotlineError
from slotline.models import KillRequest
from slotline.node.outbox import Outbox
from slotline.node.reports import end_report
from slotline.node.run import Relayed, Run
from slotline.runner.process import Outcome
from slotline.store import Claim, ClaimResult, Report

log = logging.getLogger("slotline.node")

# Why a run claimed as its node stopped went back in line unstarted.
STOPPED_FIRST = "its node stopped before starting it"
# Makes a claim that commits these ends (in the calling thread; the node's own lock held).
Claimer = Callable[[Sequence[Report]], ClaimResult]


class Relay:
    """A node's claims, one at a time: the loop's (`held`) and those made in the threads
    where runs ended (`claim`), which give way to any other."""

    def __init__(self, claimer: Claimer) -> None:
        self._claimer = claimer
        self._lock = threading.Lock()
        # Whether relays are made (the loop dispatches; not while the node stops).
        self.open = False
        # Claims made where a run ended, since the node started (read by the tests).
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


# -- the run's thread, then the loop ------------------------------------------------------


class Supervisor(Protocol):
    """What of a node's supervisor (`node/supervisor.py`) a relay's two sides use."""

    runs: dict[str, Run]
    outbox: Outbox
    relay: Relay | None
    relayed: Callable[[Relayed], None] | None
    putting_back: set[asyncio.Task[None]]

    @property
    def stopping(self) -> bool: ...

    def log_of(self, run: Run) -> Path: ...

    def log_refusal(self, run: Run, refused: SlotlineError | None) -> None: ...

    def begin(self, claim: Claim, claimed: tuple[float, float] | None = None) -> None: ...

    def handle_kills(self, requests: list[KillRequest]) -> None: ...

    def release(self, run: Run, refused: SlotlineError | None) -> None: ...


def end_in_thread(supervisor: Supervisor, run: Run, value: Any) -> None:
    """In the run's thread, once its function returned `value`: commit its end with a
    claim made here if it is the node's only run (ends that come together are better
    committed together, by the loop) and nothing but the claim is left to do (no value
    to keep: `reports.keep_result`; no stop asked for; its timeout not reached); else,
    or if that cannot be, the loop does it as for any other end. A stop asked for while
    the claim is made finds the run's end committed (the store sees the request: that
    end is not a plain one)."""
    relay = supervisor.relay
    if relay is None or value is not None or len(supervisor.runs) != 1:
        return
    if run.thread_stopped is not None or run.stopping or _passed(run.timer):
        return
    run.finishing = True  # its end is on its way: not to be taken for one gone
    try:
        report = end_report(run, Outcome(0, None), False, None, supervisor.log_of(run))
        run.relayed = relay.claim(report)
    except Exception:  # the end must still be reported: the loop does it
        log.exception("relay failed", extra={"task_id": run.task.id})


def settle(supervisor: Supervisor, run: Run, relayed: Relayed) -> None:
    """On the loop, after the claim made where `run` ended: the run is over, and what
    that claim started begins here (or, as the node stops, goes back in line)."""
    run.relayed = None
    supervisor.runs.pop(run.attempt.id, None)
    result = relayed.result
    supervisor.log_refusal(run, result.finished[0])
    for claim in result.claims:
        if supervisor.stopping:  # taken as the node stopped: back in line, never started
            _put_back(supervisor, Run(claim.task, claim.attempt, claimed=relayed.claimed))
        else:
            supervisor.begin(claim, relayed.claimed)
    supervisor.handle_kills(result.kills)
    if supervisor.relayed is not None:
        supervisor.relayed(relayed)


def _put_back(supervisor: Supervisor, run: Run) -> None:
    """Put a claimed run that never started back in line, its attempt not counted (the
    supervisor's `shutdown` waits for it)."""
    supervisor.runs[run.attempt.id] = run
    run.finishing = True
    putting = asyncio.create_task(_commit_put_back(supervisor, run))
    supervisor.putting_back.add(putting)
    putting.add_done_callback(supervisor.putting_back.discard)


async def _commit_put_back(supervisor: Supervisor, run: Run) -> None:
    report = Report(run.attempt.id, run.attempt.token, None, STOPPED_FIRST, requeue=True)
    refused = None
    try:
        await supervisor.outbox.commit(report)
    except SlotlineError as exc:
        refused = exc
    finally:
        supervisor.release(run, refused)


def _passed(timer: asyncio.TimerHandle | None) -> bool:
    """Whether `timer` (on the loop's clock, `time.monotonic`) is due: read from a thread,
    where the loop may not have run it yet."""
    return timer is not None and time.monotonic() >= timer.when()
