"""One node: the dispatch loop that claims tasks from the store and supervises their runs.

Dispatch is event-driven: the loop sleeps until the store signals a change (a submit or a
steering verb from any process, an attempt ending), a timer it asked for (a retry backoff
or a queue TTL running out) or its heartbeat, then fills every free slot in one claim.
Supervising each attempt is in `node/supervisor.py`; restart handling in `node/adopt.py`;
what the node does beside dispatch (heartbeat, guard, samples, sweeps, schedules) in
`node/duties.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from slotline import fencing
from slotline.clock import utcnow
from slotline.config.agent_types import AgentType
from slotline.config.file import Admission, Config
from slotline.errors import InvalidInput, SlotlineError
from slotline.models import Kind
from slotline.node import adopt
from slotline.node.admission import Guard, Verdict
from slotline.node.awake import KeepAwake
from slotline.node.duties import Duties
from slotline.node.outbox import Batch
from slotline.node.registration import register
from slotline.node.relay import Relay
from slotline.node.run import Relayed, RunSettings
from slotline.node.supervisor import Supervisor
from slotline.runlogs import default_log_dir
from slotline.runner.callable import Entry, Registry, TaskFunction
from slotline.runner.env import BASE_ALLOW
from slotline.runner.process import DEFAULT_LOG_MAX
from slotline.store import LEASE_SECONDS, ClaimResult, Report, StartReport, Store
from slotline.worktrees.isolate import SWEEP_INTERVAL
from slotline.worktrees.prune import WorktreePolicy

log = logging.getLogger("slotline.node")


def default_node_id() -> str:
    """Stable across restarts on one host, so a restarted node finds its own attempts."""
    return socket.gethostname()


class Node:
    """Claims tasks from a store and runs them; see `run` and `run_until_idle`."""

    def __init__(
        self,
        store: Store,
        *,
        node_id: str | None = None,
        log_dir: Path | None = None,
        callables: Mapping[str, Entry] | None = None,
        kill_grace: float = 10.0,
        heartbeat: float | None = None,
        lease: float = LEASE_SECONDS,
        slots: int | None = None,
        env_allow: Sequence[str] = BASE_ALLOW,
        log_max_bytes: int = DEFAULT_LOG_MAX,
        admission: Admission | None = None,
        guard: Guard | None = None,
        api_url: str | None = None,
        sample_interval: float = 10.0,
        sweep_interval: float = SWEEP_INTERVAL,
        worktree_policy: WorktreePolicy | None = None,
        agents: Mapping[str, AgentType] | None = None,
        config: Config | None = None,
        keep_awake: bool = False,
    ) -> None:
        self.store = store
        # The configuration it serves, published to the store when it starts (`published`).
        self.config = config
        self.node_id = node_id or default_node_id()
        self.registry = Registry(callables)
        if not (math.isfinite(lease) and lease > 0):
            raise InvalidInput(f"lease must be a positive number of seconds, not {lease!r}")
        if slots is not None and slots < 0:
            raise InvalidInput(f"slots must be 0 or more, not {slots}")
        # A few heartbeats per lease: one late beat must not get a live node reaped.
        self.heartbeat_interval = heartbeat if heartbeat is not None else min(5.0, lease / 3)
        self.slots = slots
        # The store's clock minus ours: timeouts and wake-ups are measured on the store's.
        self._skew = 0.0
        self.lease = lease
        self._changed = asyncio.Event()
        # When the last claim said to look at the line again (store clock), if ever.
        self._claim_wake: float | None = None
        # Until when the loop sleeps (store clock), and set to make it count again: a
        # claim made where a run ended (`node/relay.py`) may want it to look sooner.
        self._sleep_until = math.inf
        self._retime = asyncio.Event()
        # The id of the loop's watcher, which its own claims do not wake.
        self._watcher_id: str | None = None
        # Set once the node is registered (with the functions it serves) and dispatching.
        self.ready = asyncio.Event()
        # Set once the loop's first turn (reconcile, then a claim) is over, whether it
        # started tasks or failed: `slotline serve` starts its HTTP server after it.
        self.dispatched = asyncio.Event()
        settings = RunSettings(
            log_dir=log_dir or default_log_dir(store),
            registry=self.registry,
            kill_grace=kill_grace,
            lease=lease,
            env_allow=tuple(env_allow),
            api_url=api_url,
            log_max_bytes=log_max_bytes,
            agents=dict(agents or {}),
        )
        self.supervisor = Supervisor(store, self.node_id, settings, self._changed, self._store_now)
        self.supervisor.isolator.policy = worktree_policy
        self.supervisor.relay = Relay(self._relay_claim)
        self.supervisor.relayed = self._relayed
        self.duties = Duties(
            store,
            self.node_id,
            self.supervisor,
            lease=lease,
            heartbeat_interval=self.heartbeat_interval,
            guard=guard or Guard(admission or Admission()),
            sample_interval=sample_interval,
            sweep_interval=sweep_interval,
            store_now=self._store_now,
        )
        # Set once the node has reconciled the attempts it had when it last stopped.
        self.reconciled = self.duties.reconciled
        # Held from the first run's start to the last one's end (`keep_awake` setting).
        self.awake = KeepAwake(keep_awake)

    @property
    def log_dir(self) -> Path:
        return self.supervisor.settings.log_dir

    @property
    def api_url(self) -> str | None:
        """The HTTP API runs reach slotline through (with a task token); None: the store.
        Set once the node's server is bound."""
        return self.supervisor.settings.api_url

    @api_url.setter
    def api_url(self, url: str | None) -> None:
        self.supervisor.settings.api_url = url

    def _store_now(self) -> float:
        """Now on the store's clock: every recorded time is on it (see `Supervisor.now`)."""
        return utcnow() + self._skew

    def register(self, name: str) -> Callable[[TaskFunction], TaskFunction]:
        """Decorator: make `function` runnable as callable task `name` on this node."""

        def decorate(function: TaskFunction) -> TaskFunction:
            self.registry.register(name, function)
            return function

        return decorate

    # -- the loop ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Dispatch until `stop` is set. Commands keep running after the node stops and
        are re-adopted by the next node with the same id (on PostgreSQL, if it comes
        within the lease less its margin: `slotline.fencing`); callables are interrupted."""
        await self._loop(stop, until_idle=False)

    async def run_until_idle(self, timeout: float | None = None) -> None:
        """Dispatch until nothing runs and nothing more can start (for scripts and tests)."""
        stop = asyncio.Event()
        await asyncio.wait_for(self._loop(stop, until_idle=True), timeout)

    async def _loop(self, stop: asyncio.Event, until_idle: bool) -> None:
        await asyncio.to_thread(self._claim_node_id)
        self.ready.set()
        watcher = self.store.watcher(dispatching=True)
        self._watcher_id = watcher.id
        log.info("node started", extra={"node": self.node_id, "store": self.store.url})
        duties = self.duties.start(stop)
        reconciled = False
        failures = 0
        try:
            await self.duties.check_guard()  # before the first claim, not after it
            while not stop.is_set():
                self._changed.clear()
                try:
                    if not reconciled:
                        await adopt.reconcile(self.supervisor)
                        reconciled = True
                        self.reconciled.set()
                        self.supervisor.outbox.dispatching = True
                        self._relay.open = True
                    next_wake = await self._dispatch()
                    failures = 0
                    if self.awake.wants_update(running := len(self.supervisor.runs)):
                        await asyncio.to_thread(self.awake.update, running)
                except SlotlineError:
                    # The store is unreachable or busy: keep supervising, try again soon.
                    self.dispatched.set()
                    failures += 1
                    log.exception("dispatch failed; retrying", extra={"node": self.node_id})
                    await self._sleep(
                        watcher, stop, self._store_now() + min(0.5 * 2**failures, 10.0)
                    )
                    continue
                self.dispatched.set()
                idle = not self.supervisor.runs and next_wake is None and not self._changed.is_set()
                if until_idle and idle:
                    return
                while not await self._sleep(watcher, stop, self._wake_at()):
                    pass  # a relay's claim wants the line looked at sooner: count again
        finally:
            self._relay.open = False
            for duty in duties:
                duty.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await duty
            if self.duties.verdict != Verdict():
                with contextlib.suppress(SlotlineError):
                    await asyncio.to_thread(self.store.set_pressure, self.node_id, None, False)
            await self.supervisor.shutdown()
            await asyncio.to_thread(self.awake.release)
            self.duties.stopped()
            watcher.close()
            with contextlib.suppress(SlotlineError):
                await asyncio.to_thread(self.store.unregister_node, self.node_id)
            log.info("node stopped", extra={"node": self.node_id})

    def _claim_node_id(self) -> None:
        """Register this node on its store (`registration.register`), learning the store
        clock's skew on the way; where other nodes may reclaim its runs, its keepers learn
        from its fence file that it is alive (`slotline.fencing`), from a first heartbeat
        (registering renews no lease of the runs it will re-adopt)."""
        self._skew = register(
            self.store, self.node_id, self.lease, self.registry.names(), self.config
        )
        if self.store.dialect == "postgres":
            self.supervisor.fence = fencing.Fence(
                fencing.fence_file(self.log_dir, self.node_id), self.lease
            )
            if self.heartbeat_interval * 2 > self.lease - self.supervisor.fence.margin:
                log.warning(
                    "a heartbeat every %gs leaves a %gs lease no room for a late one: "
                    "this node's runs may be fenced while it lives",
                    self.heartbeat_interval,
                    self.lease,
                    extra={"node": self.node_id},
                )
        self.duties.beat()

    @property
    def _relay(self) -> Relay:
        assert self.supervisor.relay is not None
        return self.supervisor.relay

    def _wake_at(self) -> float:
        """When the loop wakes (store clock): when its last claim or a schedule says, at
        the latest a heartbeat from now."""
        wakes = (self._claim_wake, self.duties.schedules_due)
        due = [wake for wake in wakes if wake is not None and not math.isnan(wake)]
        return min([self._store_now() + self.heartbeat_interval, *due])

    async def _sleep(self, watcher: Any, stop: asyncio.Event, until: float) -> bool:
        """Sleep until `until` (store clock) or until woken; False if only to count again
        when to wake."""
        self._retime.clear()
        self._sleep_until = until
        delay = max(0.0, until - self._store_now())
        retimed = asyncio.create_task(self._retime.wait())
        waiters = [
            asyncio.create_task(watcher.wait(delay)),
            asyncio.create_task(self._changed.wait()),
            asyncio.create_task(stop.wait()),
            retimed,
        ]
        try:
            done, _ = await asyncio.wait(
                waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            self._sleep_until = math.inf
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)
        return done != {retimed}

    async def _dispatch(self) -> float | None:
        due = self.duties.schedules_due
        if due is not None and (math.isnan(due) or due <= self._store_now()):
            await self.duties.fire_schedules()
        batch = self.supervisor.outbox.take()
        if self._full(batch):
            # Every slot of this node is taken and it has nothing to report: a claim
            # could start nothing here, and would wait for the write lock to say so. It
            # only learns, in a read, which of its runs to stop and when a queue TTL
            # lapses (a claim then expires the task, full or not).
            glance = await asyncio.to_thread(self.store.between_claims, self.node_id)
            if glance.now is not None:
                self._skew = glance.now - utcnow()
            self.supervisor.settle(batch, glance)
            wakes = [w for w in (self._claim_wake, glance.next_wake) if w is not None]
            self._claim_wake = min(wakes, default=None)  # a claim's turn, once due
            return self._claim_wake
        full = self.supervisor.space.reason is not None and await asyncio.to_thread(
            self.supervisor.space.holding
        )
        sent = fencing.clock()  # what it claims must start within its lease from now
        try:
            result = await asyncio.to_thread(self._claim_held, full, batch.started, batch.finished)
        except BaseException:
            self.supervisor.outbox.restore(batch)
            raise
        if result.now is not None:
            self._skew = result.now - utcnow()
        self.supervisor.settle(batch, result, (sent, fencing.clock()))
        self._claim_wake = result.next_wake
        return result.next_wake

    def _claim_held(
        self,
        hold: bool,
        started: Sequence[StartReport],
        finished: Sequence[Report],
    ) -> ClaimResult:
        """The loop's claim (in a thread): after any relay under way."""
        with self._relay.held():
            return self._claim(hold, started, finished)

    def _claim(
        self,
        hold: bool,
        started: Sequence[StartReport],
        finished: Sequence[Report],
    ) -> ClaimResult:
        kinds = {Kind.COMMAND.value}
        if self.registry.names():
            kinds.add(Kind.CALLABLE.value)
        return self.store.claim(
            self.node_id,
            kinds=frozenset(kinds),
            lease=self.lease,
            hold=hold,  # the guard's verdict the claim reads from this node's row
            slots=self.slots,
            started=started,
            finished=finished,
            log_dir=self.supervisor.settings.log_dir,
            watcher=self._watcher_id,
            functions=self.registry.names(),
        )

    def _relay_claim(self, finished: Sequence[Report]) -> ClaimResult:
        """A claim made in the thread where a function's run ended (`node/relay.py`)."""
        space = self.supervisor.space
        return self._claim(space.reason is not None and space.holding(), (), finished)

    def _relayed(self, relayed: Relayed) -> None:
        """On the loop, after a relay's claim was settled: what the loop's own claim
        would have learnt from it. A relay that started nothing wakes the loop (to see
        whether it is idle); one whose claim wants the line looked at before the loop
        wakes makes it count its sleep again."""
        result = relayed.result
        if result.now is not None:
            self._skew = result.now - utcnow()
        self._claim_wake = result.next_wake
        if not result.claims:
            self._changed.set()
        elif result.next_wake is not None and result.next_wake < self._sleep_until:
            self._retime.set()

    def _full(self, batch: Batch) -> bool:
        """Whether this node's own slots are all taken, with no report to commit and no
        chore of the last claim due (a TTL to expire, a delayed start, a budget's end)."""
        if self.slots is None or batch.starts or batch.ends:
            return False
        wake = self._claim_wake
        due = wake is not None and wake <= self._store_now()
        return len(self.supervisor.runs) >= self.slots and not due


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGINT and SIGTERM set `stop` (for `slotline serve`)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
