"""One node: the dispatch loop that claims tasks from the store and supervises their runs.

Dispatch is event-driven: the loop sleeps until the store signals a change (a submit or a
steering verb from any process, an attempt ending), a timer it asked for (a retry backoff
or a queue TTL running out) or its heartbeat, then fills every free slot in one claim.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from slotline.errors import SlotlineError, StaleAttempt
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
        watcher = self.store.watcher()
        await asyncio.to_thread(self.store.register_node, self.node_id)
        log.info("node started", extra={"node": self.node_id, "store": self.store.url})
        beat = asyncio.create_task(self._heartbeat(stop))
        guard = asyncio.create_task(self._guard(stop))
        try:
            await self._check_guard()  # before the first claim, not after it
            await self._reconcile()
            while not stop.is_set():
                self._changed.clear()
                next_wake = await self._dispatch()
                await self._handle_kills()
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
            await asyncio.to_thread(
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
        await asyncio.to_thread(
            self.store.record_start,
            attempt.id,
            attempt.token,
            handle.pid,
            handle.pid_started,
            str(log_path),
        )
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

    async def _finish(self, run: _Run, outcome: Outcome) -> None:
        try:
            await asyncio.to_thread(
                self.store.finish,
                run.attempt.id,
                run.attempt.token,
                outcome.exit_code,
                outcome.reason,
            )
        except StaleAttempt as exc:
            log.warning("outcome not recorded: %s", exc, extra={"task_id": run.task.id})
        finally:
            self._runs.pop(run.attempt.id, None)
            self._changed.set()

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
            if code is not None:
                action, outcome = "collected", Outcome(code, describe_exit(code))
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
            await self._finish(run, outcome)

    async def _adopted(self, run: _Run, handle: ProcessHandle) -> None:
        await self._finish(run, await self._wait(run, handle))

    async def _reap_lapsed(self) -> None:
        """Finish attempts of other nodes whose heartbeat lapsed (their node is gone)."""
        for attempt in await asyncio.to_thread(self.store.live_attempts, None):
            if attempt.node_id == self.node_id:
                continue
            with contextlib.suppress(StaleAttempt):
                await asyncio.to_thread(
                    self.store.finish,
                    attempt.id,
                    attempt.token,
                    None,
                    f"interrupted: node {attempt.node_id} stopped heartbeating",
                )

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
