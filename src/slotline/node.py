"""One node: the dispatch loop that claims tasks from the store and supervises their runs.

Dispatch is event-driven: the loop sleeps until the store signals a change (a submit or a
steering verb from any process, an attempt ending), a timer it asked for (a retry backoff
or a queue TTL running out) or its heartbeat, then fills every free slot in one claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotline.admission import Guard, Verdict
from slotline.config import Admission
from slotline.errors import InvalidInput, SlotlineError, StaleAttempt, StoreError
from slotline.models import Attempt, Kind, Task, utcnow
from slotline.runner.callable import Registry, TaskFunction, run_callable
from slotline.runner.env import BASE_ALLOW, build_env
from slotline.runner.process import (
    DEFAULT_LOG_MAX,
    Outcome,
    ProcessHandle,
    SpawnError,
    describe_exit,
    process_start_time,
    read_exit_file,
    spawn,
)
from slotline.runner.proctree import TreeSampler
from slotline.store import Claim, Store

log = logging.getLogger("slotline.node")


def default_node_id() -> str:
    """Stable across restarts on one host, so a restarted node finds its own attempts."""
    return socket.gethostname()


def default_log_dir(store: Store) -> Path:
    path = getattr(store, "path", None)
    if isinstance(path, Path):
        return path.parent / "logs"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "slotline" / "logs"


@dataclass
class _Run:
    """One attempt this node supervises."""

    task: Task
    attempt: Attempt
    handle: ProcessHandle | None = None
    inner: asyncio.Task[Outcome] | None = None
    stopping: bool = False
    # A stop asked for before the process (or callable) existed, applied once it does.
    stop_reason: str | None = None
    finishing: bool = False
    watcher: asyncio.Task[None] | None = field(default=None, repr=False)


class Node:
    """Claims tasks from a store and runs them; see `run` and `run_until_idle`."""

    def __init__(
        self,
        store: Store,
        *,
        node_id: str | None = None,
        log_dir: Path | None = None,
        callables: Mapping[str, TaskFunction] | None = None,
        kill_grace: float = 10.0,
        heartbeat: float = 5.0,
        lease: float = 30.0,
        env_allow: Sequence[str] = BASE_ALLOW,
        log_max_bytes: int = DEFAULT_LOG_MAX,
        admission: Admission | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.store = store
        self.node_id = node_id or default_node_id()
        self.log_dir = log_dir or default_log_dir(store)
        self.registry = Registry(callables)
        self.kill_grace = kill_grace
        self.heartbeat_interval = heartbeat
        self.guard_interval = 2.0
        self._sampler = TreeSampler()
        self.lease = lease
        self.env_allow = tuple(env_allow)
        self.log_max_bytes = log_max_bytes
        self.guard = guard or Guard(admission or Admission())
        self._verdict = Verdict()
        self._runs: dict[str, _Run] = {}
        self._changed = asyncio.Event()
        self._stopping = False
        self._stoppers: set[asyncio.Task[None]] = set()

    def register(self, name: str) -> Callable[[TaskFunction], TaskFunction]:
        """Decorator: make `function` runnable as callable task `name` on this node."""

        def decorate(function: TaskFunction) -> TaskFunction:
            self.registry.register(name, function)
            return function

        return decorate

    # -- the loop ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Dispatch until `stop` is set. Commands keep running after the node stops and
        are re-adopted by the next node with the same id; callables are interrupted."""
        await self._loop(stop, until_idle=False)

    async def run_until_idle(self, timeout: float | None = None) -> None:
        """Dispatch until nothing runs and nothing more can start (for scripts and tests)."""
        stop = asyncio.Event()
        await asyncio.wait_for(self._loop(stop, until_idle=True), timeout)

    async def _loop(self, stop: asyncio.Event, until_idle: bool) -> None:
        await asyncio.to_thread(self._claim_node_id)
        watcher = self.store.watcher()
        log.info("node started", extra={"node": self.node_id, "store": self.store.url})
        beat = asyncio.create_task(self._heartbeat(stop))
        guard = asyncio.create_task(self._guard(stop))
        reconciled = False
        failures = 0
        try:
            await self._check_guard()  # before the first claim, not after it
            while not stop.is_set():
                self._changed.clear()
                try:
                    if not reconciled:
                        await self._reconcile()
                        reconciled = True
                    next_wake = await self._dispatch()
                    await self._handle_kills()
                    failures = 0
                except SlotlineError:
                    # The store is unreachable or busy: keep supervising, try again soon.
                    failures += 1
                    log.exception("dispatch failed; retrying", extra={"node": self.node_id})
                    await self._sleep(watcher, stop, min(0.5 * 2**failures, 10.0))
                    continue
                idle = not self._runs and next_wake is None and not self._changed.is_set()
                if until_idle and idle:
                    return
                delay = self.heartbeat_interval
                if next_wake is not None:
                    delay = max(0.0, min(delay, next_wake - utcnow()))
                await self._sleep(watcher, stop, delay)
        finally:
            for background in (beat, guard):
                background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await background
            if self._verdict.reason is not None:
                with contextlib.suppress(SlotlineError):
                    await asyncio.to_thread(self.store.set_pressure, self.node_id, None, False)
            await self._shutdown()
            watcher.close()
            with contextlib.suppress(SlotlineError):
                await asyncio.to_thread(self.store.unregister_node, self.node_id)
            log.info("node stopped", extra={"node": self.node_id})

    def _claim_node_id(self) -> None:
        """Register, refusing while another live node has this id: it would reconcile and
        signal this node's runs as its own."""
        row = self.store.node(self.node_id)
        if row is not None and float(row["heartbeat_at"]) > utcnow() - self.lease:
            here = row["host"] == socket.gethostname()
            itself = here and row["pid"] == os.getpid()
            alive = here and _running_since(int(row["pid"]), float(row["started_at"]))
            if not itself and (alive or not here):
                raise InvalidInput(
                    f"another node named {self.node_id!r} is running (pid {row['pid']} on "
                    f"{row['host']}); stop it, or give this one another --node-id"
                )
        self.store.register_node(self.node_id)

    async def _sleep(self, watcher: Any, stop: asyncio.Event, delay: float) -> None:
        waiters = [
            asyncio.create_task(watcher.wait(delay)),
            asyncio.create_task(self._changed.wait()),
            asyncio.create_task(stop.wait()),
        ]
        try:
            await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*waiters, return_exceptions=True)

    async def _dispatch(self) -> float | None:
        kinds = {Kind.COMMAND.value}
        if self.registry.names():
            kinds.add(Kind.CALLABLE.value)
        result = await asyncio.to_thread(
            self.store.claim,
            self.node_id,
            kinds=frozenset(kinds),
            lease=self.lease,
            hold=self._verdict.hold,
            limit=self._verdict.limit,
        )
        for claim in result.claims:
            self._begin(claim)
        return result.next_wake

    async def _guard(self, stop: asyncio.Event) -> None:
        """Sample the machine; hold or shrink dispatch while it is past its thresholds."""
        while not stop.is_set():
            await asyncio.sleep(self.guard_interval)
            await self._check_guard()

    async def _check_guard(self) -> None:
        if not self.guard.enabled:
            return
        try:
            settings = await asyncio.to_thread(self.store.settings)
            verdict = self.guard.check(int(settings["max_concurrent"]), len(self._runs), utcnow())
            if verdict != self._verdict:
                self._verdict = verdict
                await asyncio.to_thread(
                    self.store.set_pressure, self.node_id, verdict.reason, verdict.hold
                )
                self._changed.set()
        except SlotlineError:
            log.exception("resource guard failed", extra={"node": self.node_id})

    async def _sample_usage(self) -> None:
        """Record CPU% and RSS of each running command's whole process tree."""
        usage = {}
        for run in list(self._runs.values()):
            if run.handle is not None:
                sample = self._sampler.sample(run.handle.pid, run.handle.pid_started)
                if sample is not None:
                    usage[run.attempt.id] = (sample.cpu_percent, sample.rss)
        if usage:
            await asyncio.to_thread(self.store.record_usage, usage)

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.sleep(self.heartbeat_interval)
            try:
                await asyncio.to_thread(self.store.heartbeat, self.node_id, lease=self.lease)
                await self._fence()
                await self._sample_usage()
                await self._reap_lapsed()
            except SlotlineError:
                log.exception("heartbeat failed", extra={"node": self.node_id})

    # -- attempts ---------------------------------------------------------------------

    def _paths(self, task: Task, attempt: Attempt) -> Path:
        return self.log_dir / task.id / f"{attempt.number}.log"

    def _begin(self, claim: Claim) -> None:
        run = _Run(claim.task, claim.attempt)
        self._runs[claim.attempt.id] = run
        run.watcher = asyncio.create_task(self._supervise(run))

    async def _supervise(self, run: _Run) -> None:
        task, attempt = run.task, run.attempt
        log_path = self._paths(task, attempt)
        try:
            outcome = await self._execute(run, log_path)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not leave the task running forever
            log.exception("attempt crashed", extra={"task_id": task.id})
            outcome = Outcome(None, f"internal error: {exc}")
        await self._finish(run, outcome)

    async def _execute(self, run: _Run, log_path: Path) -> Outcome:
        task, attempt = run.task, run.attempt
        if task.kind is Kind.CALLABLE:
            function = self.registry.get(task.callable or "")
            if function is None:
                return Outcome(None, f"no callable named {task.callable!r} on this node")
            await self._with_retries(
                self.store.record_start, attempt.id, attempt.token, None, None, str(log_path)
            )
            run.inner = asyncio.create_task(
                run_callable(function, task.args, task.timeout, log_path)
            )
            self._apply_stop(run)
            try:
                return await run.inner
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                if self._stopping:
                    return Outcome(None, "interrupted: the node stopped")
                return Outcome(None, "stopped by request")
        env = build_env(task, attempt, self.store.url, allow=self.env_allow)
        try:
            handle = await spawn(
                list(task.command),
                task.workspace,
                env,
                log_path,
                memory_mb=task.memory_mb,
                log_max_bytes=self.log_max_bytes,
            )
        except SpawnError as exc:
            return Outcome(None, str(exc))
        run.handle = handle
        self._apply_stop(run)
        try:
            await self._with_retries(
                self.store.record_start,
                attempt.id,
                attempt.token,
                handle.pid,
                handle.pid_started,
                str(log_path),
            )
        except SlotlineError:
            # The attempt is no longer ours to run (or the store is gone while stopping):
            # never leave its process running unsupervised.
            await handle.stop("its start could not be recorded", self.kill_grace)
            await handle.wait()
            raise
        return await self._wait(run, handle)

    async def _wait(self, run: _Run, handle: ProcessHandle) -> Outcome:
        timeout = run.task.timeout
        if timeout is not None and run.attempt.started_at:
            timeout = max(0.0, run.attempt.started_at + timeout - utcnow())
        waiting = asyncio.create_task(handle.wait())
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), timeout)
        except TimeoutError:
            await handle.stop(f"timed out after {run.task.timeout:g}s", self.kill_grace)
            return await waiting

    async def _finish(self, run: _Run, outcome: Outcome, requeue: bool = False) -> None:
        """Commit the outcome. The run stays tracked until the store has it: a store that
        is briefly unreachable must not leave the task 'running' with nothing running."""
        run.finishing = True
        try:
            await self._with_retries(
                self.store.finish,
                run.attempt.id,
                run.attempt.token,
                outcome.exit_code,
                outcome.reason,
                requeue=requeue,
            )
        except StaleAttempt as exc:
            log.warning("outcome not recorded: %s", exc, extra={"task_id": run.task.id})
        except SlotlineError:
            log.exception(
                "outcome not recorded; the next node start reconciles it",
                extra={"task_id": run.task.id},
            )
        finally:
            self._runs.pop(run.attempt.id, None)
            self._changed.set()

    async def _with_retries(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a store verb, retrying while the store itself fails (not on refusals)."""
        delay = 0.1
        while True:
            try:
                return await asyncio.to_thread(function, *args, **kwargs)
            except StoreError:
                if self._stopping:
                    raise
                log.warning("store unavailable; retrying in %.1fs", delay, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _handle_kills(self) -> None:
        requests = await asyncio.to_thread(self.store.kill_requests, self.node_id)
        for request in requests:
            run = self._runs.get(request.attempt_id)
            if run is None or run.stopping:
                continue
            run.stopping = True
            run.stop_reason = {"cancel": "cancelled", "restart": "restarted"}.get(
                request.kind, "terminated: " + request.kind.removeprefix("terminate:")
            )
            self._apply_stop(run)

    def _apply_stop(self, run: _Run) -> None:
        """Stop a run whose stop was requested, if it has started; else `_execute` calls
        this again as soon as its process or callable exists (no request is lost)."""
        if run.stop_reason is None:
            return
        if run.handle is not None:
            stopper = asyncio.create_task(run.handle.stop(run.stop_reason, self.kill_grace))
            self._stoppers.add(stopper)
            stopper.add_done_callback(self._stoppers.discard)
        elif run.inner is not None:
            run.inner.cancel()

    # -- restart and shutdown -----------------------------------------------------------

    async def _reconcile(self) -> None:
        """Look at the attempts the store says this node runs: re-adopt live processes,
        finish dead ones from their exit file, or mark them interrupted."""
        for attempt in await asyncio.to_thread(self.store.live_attempts, self.node_id):
            if attempt.id in self._runs:
                continue
            task = await asyncio.to_thread(self.store.get, attempt.task_id)
            run = _Run(task, attempt)
            log_path = Path(attempt.log_path) if attempt.log_path else self._paths(task, attempt)
            exit_path = log_path.with_suffix(".exit")
            pid, pid_started = attempt.pid, attempt.pid_started
            if pid is None:  # the node died between spawning and recording the pid
                pid, pid_started = _pid_from_file(log_path.with_suffix(".pid"))
            if pid is not None and pid_started is not None:
                handle = ProcessHandle.adopt(pid, pid_started, log_path, exit_path)
                if handle.alive():
                    log.info(
                        "re-adopted a running attempt",
                        extra={"task_id": task.id, "pid": pid},
                    )
                    await asyncio.to_thread(
                        self.store.note_reconciled, task.id, attempt.id, "adopted", pid=pid
                    )
                    run.handle = handle
                    self._runs[attempt.id] = run
                    run.watcher = asyncio.create_task(self._adopted(run, handle))
                    continue
            code = read_exit_file(exit_path)
            never_spawned = (
                task.kind is Kind.COMMAND and pid is None and code is None
                and not log_path.with_suffix(".pid").exists()
            )  # fmt: skip
            if code is not None:
                action, outcome = "collected", Outcome(code, describe_exit(code))
            elif never_spawned:
                reason = "interrupted before its command started; queued again"
                action, outcome = "requeued", Outcome(None, reason)
            else:
                reason = "interrupted: the node stopped and the process is gone"
                action, outcome = "interrupted", Outcome(None, reason)
            log.info(
                "finishing an attempt left by a stopped node",
                extra={"task_id": task.id, "reason": outcome.reason},
            )
            await asyncio.to_thread(
                self.store.note_reconciled,
                task.id,
                attempt.id,
                action,
                exit_code=outcome.exit_code,
                reason=outcome.reason,
            )
            self._runs[attempt.id] = run
            await self._finish(run, outcome, requeue=never_spawned)

    async def _adopted(self, run: _Run, handle: ProcessHandle) -> None:
        await self._finish(run, await self._wait(run, handle))

    async def _reap_lapsed(self) -> None:
        """Finish attempts of other nodes that are gone: the attempt's lease lapsed and its
        node has not heartbeated for a whole lease (both re-checked in the transaction).
        A node that was only slow finds its attempts finished and stops their processes
        (see `_fence`), so a task never runs twice."""
        for attempt in await asyncio.to_thread(self.store.live_attempts, None):
            if attempt.node_id == self.node_id:
                continue
            with contextlib.suppress(StaleAttempt):
                await asyncio.to_thread(
                    functools.partial(
                        self.store.finish,
                        attempt.id,
                        attempt.token,
                        None,
                        f"interrupted: node {attempt.node_id} stopped heartbeating",
                        reap_after=self.lease,
                    )
                )

    async def _fence(self) -> None:
        """Stop the processes of attempts that another node finished meanwhile (this node
        was too slow to heartbeat and was taken for dead)."""
        live = {a.id for a in await asyncio.to_thread(self.store.live_attempts, self.node_id)}
        for run in list(self._runs.values()):
            if run.attempt.id in live or run.finishing or run.stopping:
                continue
            log.warning(
                "attempt finished by another node; stopping it here", extra={"task_id": run.task.id}
            )
            run.stopping = True
            run.stop_reason = "finished elsewhere: this node was taken for dead"
            self._apply_stop(run)

    async def _shutdown(self) -> None:
        """Stop supervising. Processes keep running (a restarted node re-adopts them);
        callables cannot outlive the node: they are interrupted and their outcome recorded."""
        self._stopping = True
        pending = []
        for run in list(self._runs.values()):
            if run.inner is not None:
                run.inner.cancel()
            elif run.watcher is not None:
                run.watcher.cancel()
            if run.watcher is not None:
                pending.append(run.watcher)
        await asyncio.gather(*pending, return_exceptions=True)
        self._runs.clear()


def _running_since(pid: int, since: float) -> bool:
    """True if process `pid` exists and already existed at `since` (not a reused pid)."""
    started = process_start_time(pid)
    return started is not None and started <= since + 1.0


def _pid_from_file(path: Path) -> tuple[int | None, float | None]:
    """The keeper's pid from its pid file, if that process is the one that wrote it."""
    pid = read_exit_file(path)
    if pid is None:
        return None, None
    started = process_start_time(pid)
    with contextlib.suppress(OSError):
        if started is not None and abs(path.stat().st_mtime - started) < 5.0:
            return pid, started
    return None, None


def install_signal_handlers(stop: asyncio.Event) -> None:
    """SIGINT and SIGTERM set `stop` (for `slotline serve`)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
