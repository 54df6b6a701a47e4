"""A node's duties beside dispatch, each on a cadence of its own: its heartbeat (on a
thread of its own), the machine's guard, the line's samples for the charts, the sweeps
of its worktrees, the heartbeat's chores (runs finished elsewhere, usage, lapsed nodes'
runs, schedules), the deadlines of the functions run inside it, and the recurring
schedules' ticks, which the dispatch loop fires when due."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from slotline import fencing
from slotline.clock import utcnow
from slotline.errors import SlotlineError
from slotline.node import adopt
from slotline.node.admission import Guard, Verdict
from slotline.node.supervisor import Supervisor
from slotline.runner.proctree import TreeSampler
from slotline.store import Store
from slotline.worktrees.gitpool import run_git

log = logging.getLogger("slotline.node")


class Duties:
    """What a node does beside its claims; `start` runs each in a task of its own."""

    def __init__(
        self,
        store: Store,
        node_id: str,
        supervisor: Supervisor,
        *,
        lease: float,
        heartbeat_interval: float,
        guard: Guard,
        sample_interval: float,
        sweep_interval: float,
        store_now: Callable[[], float],
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.supervisor = supervisor
        # The CPU and memory of each run's process tree, sampled with the chores.
        self.sampler = TreeSampler()
        self.lease = lease
        self.heartbeat_interval = heartbeat_interval
        self.guard = guard
        self.guard_interval = 2.0
        # How often the line is sampled for the dashboard's charts (0: never).
        self.sample_interval = sample_interval
        # Seconds between sweeps of the node's worktrees besides those after a run's
        # worktree closed (0: none but those, and the one at the start).
        self.sweep_interval = sweep_interval
        self.store_now = store_now
        # The guard's last verdict, as recorded on the node's row.
        self.verdict = Verdict()
        # Set to wake the dispatch loop (the supervisor's event).
        self.changed = supervisor.changed
        # The next tick of a recurring schedule (store clock); NaN until first asked.
        self.schedules_due: float | None = math.nan
        # Set once the node has reconciled the attempts it had when it last stopped.
        self.reconciled = asyncio.Event()
        # The heartbeat's own thread (`_heartbeat`), from `start` until `stopped`.
        self._beats: ThreadPoolExecutor | None = None

    def start(self, stop: asyncio.Event) -> list[asyncio.Task[None]]:
        """Start every duty until `stop` is set; the caller cancels the tasks at the end."""
        beats = self._beats = ThreadPoolExecutor(1, thread_name_prefix="slotline-heartbeat")
        return [
            asyncio.create_task(duty)
            for duty in (
                self._heartbeat(stop, beats),
                self._chores(stop),
                self._fence_in_node(stop),
                self._guard(stop),
                self._sample_line(stop),
                self._sweep_worktrees(stop),
            )
        ]

    def stopped(self) -> None:
        """The node has stopped: let the heartbeat's thread go (a beat hung on the store
        must not hold up the node's exit)."""
        if self._beats is not None:
            self._beats.shutdown(wait=False)

    def beat(self) -> None:
        """Renew the node's liveness and its runs' leases; tell its keepers once every
        lease was renewed (a run passed over, being ended or reaped, keeps its last)."""
        sent = fencing.clock()
        renewed = self.store.heartbeat(self.node_id, lease=self.lease)
        if self.supervisor.fence is not None and renewed:
            self.supervisor.fence.confirm(sent)

    async def fire_schedules(self) -> None:
        """Submit the tasks of the schedules' due ticks (each tick once, whichever node
        gets there first) and note when the next one is due."""
        try:
            result = await asyncio.to_thread(self.store.fire_schedules)
        except SlotlineError:
            # Tried again after the next heartbeat; dispatch goes on meanwhile.
            log.exception("firing schedules failed", extra={"node": self.node_id})
            self.schedules_due = None
            return
        self.schedules_due = result.next_at
        for fired in result.fired:
            extra = {"node": self.node_id, "schedule": fired.name}
            if fired.task is not None:
                log.info("schedule fired", extra={**extra, "task_id": fired.task.id})
            else:
                log.info("schedule tick skipped: %s", fired.reason, extra=extra)

    async def _watch_schedules(self) -> None:
        """Learn of schedules added, resumed or changed by anyone (once a heartbeat)."""
        due = await asyncio.to_thread(self.store.next_schedule_at)
        known = self.schedules_due
        if known is not None and math.isnan(known):
            return  # the loop has not asked yet; it will
        self.schedules_due = due
        if due is not None and (known is None or due < known):
            self.changed.set()

    async def _guard(self, stop: asyncio.Event) -> None:
        """Sample the machine; hold or shrink dispatch while it is past its thresholds."""
        while not stop.is_set():
            await asyncio.sleep(self.guard_interval)
            await self.check_guard()

    async def check_guard(self) -> None:
        if not self.guard.enabled:
            return
        try:
            settings = await asyncio.to_thread(self.store.settings)
            running = len(self.supervisor.runs)
            verdict = self.guard.check(int(settings["max_concurrent"]), running, utcnow())
            if verdict != self.verdict:
                self.verdict = verdict
                await asyncio.to_thread(
                    self.store.set_pressure,
                    self.node_id,
                    verdict.reason,
                    verdict.hold,
                    verdict.limit,
                )
                self.changed.set()
        except Exception:  # the guard goes on sampling; a failure is logged, not fatal
            log.exception("resource guard failed", extra={"node": self.node_id})

    async def _sample_line(self, stop: asyncio.Event) -> None:
        """Write a sample of the line every `sample_interval` seconds (the charts)."""
        while self.sample_interval > 0 and not stop.is_set():
            try:
                await asyncio.to_thread(self.store.record_sample, self.sample_interval)
            except SlotlineError:
                log.exception("sampling the line failed", extra={"node": self.node_id})
            await asyncio.sleep(self.sample_interval)

    async def _sweep_worktrees(self, stop: asyncio.Event) -> None:
        """Once the node has reconciled its attempts, then every `sweep_interval` and soon
        after a run's worktree is closed: close the worktrees a crash left open, remove
        those of tasks that are gone, then apply the retention policy (in a worker
        thread, beside dispatch, never in its way)."""
        await self.reconciled.wait()
        isolator = self.supervisor.isolator
        while not stop.is_set():
            isolator.closed.clear()
            try:
                running = set(self.supervisor.runs)
                # On the pool for git work: the heartbeat's and claims' threads stay free.
                await run_git(isolator.sweep, running)
                await run_git(isolator.prune, self.store_now())
            except Exception:  # the next sweep tries again
                log.exception("worktree sweep failed", extra={"node": self.node_id})
            waits = [
                asyncio.ensure_future(stop.wait()),
                asyncio.ensure_future(isolator.closed.wait()),
            ]
            every = self.sweep_interval or None
            await asyncio.wait(waits, timeout=every, return_when=asyncio.FIRST_COMPLETED)
            for waiting in waits:
                waiting.cancel()

    async def _heartbeat(self, stop: asyncio.Event, beats: ThreadPoolExecutor) -> None:
        """Beat on a fixed cadence, on a thread of its own: neither the chores below nor
        the functions on the default thread pool may delay a beat past its lease, or
        this node's keepers would fence its runs while it lives."""
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await loop.run_in_executor(beats, self.beat)
            except Exception:
                # Whatever failed (the store, a bug), the next beat must come: a node that
                # stops heartbeating is taken for dead and its runs are started elsewhere.
                log.exception("heartbeat failed", extra={"node": self.node_id})

    async def _chores(self, stop: asyncio.Event) -> None:
        """Once a heartbeat interval: stop runs finished elsewhere, sample usage, reap
        gone nodes' runs, learn of schedules."""
        while not stop.is_set():
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await adopt.fence(self.supervisor)
                await self._sample_usage()
                await adopt.reap_lapsed(self.supervisor)
                await self._watch_schedules()  # last: what fails here skips nothing
            except Exception:
                log.exception("heartbeat chores failed", extra={"node": self.node_id})

    async def _sample_usage(self) -> None:
        """Record CPU% and RSS of each running command's (or function's worker's) whole
        process tree."""
        usage = {}
        for run in list(self.supervisor.runs.values()):
            process = run.handle or run.worker
            if process is not None:
                sample = self.sampler.sample(process.pid, process.pid_started)
                if sample is not None:
                    usage[run.attempt.id] = (sample.cpu_percent, sample.rss)
        if usage:
            await asyncio.to_thread(self.store.record_usage, usage)

    async def _fence_in_node(self, stop: asyncio.Event) -> None:
        """Functions run inside this node have no keeper: the node stops them itself at
        their deadline (`Supervisor.fence_in_node`)."""
        fence = self.supervisor.fence
        if fence is None:
            return
        while not stop.is_set():
            await asyncio.sleep(min(0.25, fence.margin / 2))
            self.supervisor.fence_in_node()
