"""Per-attempt supervision: start a claimed attempt, watch it, stop it on request, finish it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotline.errors import InvalidInput, SlotlineError, StaleAttempt, StoreError
from slotline.models import Attempt, KillRequest, Kind, Task, log_file
from slotline.runner.callable import Entry, Registry, run_callable
from slotline.runner.env import build_env
from slotline.runner.functions import FunctionRef, ProcessRun, run_in_process
from slotline.runner.process import Outcome, ProcessHandle, SpawnError, spawn
from slotline.runner.proctree import TreeSampler
from slotline.store import Claim, ClaimResult, Report, StartReport, Store

# The node's logger: records keep the name they had before supervision moved here.
log = logging.getLogger("slotline.node")


@dataclass
class Run:
    """One attempt this node supervises."""

    task: Task
    attempt: Attempt
    handle: ProcessHandle | None = None
    inner: asyncio.Task[Outcome] | None = None
    # A function's worker process (stopped through `inner`; sampled like a command).
    worker: ProcessHandle | None = None
    stopping: bool = False
    # A stop asked for before the process (or callable) existed, applied once it does.
    stop_reason: str | None = None
    finishing: bool = False
    watcher: asyncio.Task[None] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Batch:
    """The reports a dispatch turn commits with its claim, and their waiters."""

    starts: list[tuple[StartReport, asyncio.Future[SlotlineError | None]]]
    ends: list[tuple[Report, asyncio.Future[SlotlineError | None]]]

    @property
    def started(self) -> list[StartReport]:
        return [report for report, _ in self.starts]

    @property
    def finished(self) -> list[Report]:
        return [report for report, _ in self.ends]


@dataclass(slots=True)
class RunSettings:
    """How a node runs its attempts (`api_url` is set once the node's server is bound)."""

    log_dir: Path
    registry: Registry
    kill_grace: float
    lease: float
    env_allow: tuple[str, ...]
    # The HTTP API runs reach slotline through (with a task token); None: the store.
    api_url: str | None
    log_max_bytes: int


class Supervisor:
    """A node's attempts: start each claimed one, watch it, stop it on request, report its
    outcome. The node owns one; `runner/adopt.py` re-adopts attempts through it."""

    def __init__(
        self,
        store: Store,
        node_id: str,
        settings: RunSettings,
        changed: asyncio.Event,
        clock: Callable[[], float],
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.settings = settings
        # Set when a slot frees outside the dispatch loop: the loop wakes to refill it.
        self.changed = changed
        # Now on the store's clock (the database server's on PostgreSQL), where every
        # recorded time is: a node whose own clock is off still measures timeouts right.
        self.now = clock
        self.runs: dict[str, Run] = {}
        self.sampler = TreeSampler()
        self.stopping = False
        # Whether the dispatch loop is there to commit reports with its next claim (else
        # each is committed on its own), and the reports waiting for it.
        self.dispatching = False
        self._reports: list[tuple[Report | StartReport, asyncio.Future[SlotlineError | None]]]
        self._reports = []
        self._stoppers: set[asyncio.Task[None]] = set()

    def log_path(self, task: Task, attempt: Attempt) -> Path:
        return Path(log_file(self.settings.log_dir, task.id, attempt.number))

    # -- the dispatch loop's side -------------------------------------------------------

    def take_reports(self) -> Batch:
        """The reports waiting for a claim; give them back with `restore` if it fails."""
        pending, self._reports = self._reports, []
        return Batch(
            [(r, done) for r, done in pending if isinstance(r, StartReport)],
            [(r, done) for r, done in pending if isinstance(r, Report)],
        )

    def restore(self, batch: Batch) -> None:
        """Reports a failed claim did not commit: they go with the next one."""
        self._reports[:0] = [*batch.starts, *batch.ends]

    def settle(self, batch: Batch, result: ClaimResult) -> None:
        """After a claim committed `batch`: answer its waiters, start what it claimed and
        stop what someone asked to stop."""
        for (_, done), refused in zip(batch.starts, result.recorded, strict=True):
            if not done.done():  # its waiter may have been cancelled meanwhile
                done.set_result(refused)
        for (end, done), refused in zip(batch.ends, result.finished, strict=True):
            # The claim refilled the slot: the run is over for the loop's bookkeeping.
            self.runs.pop(end.attempt_id, None)
            if not done.done():
                done.set_result(refused)
        for claim in result.claims:
            self.begin(claim)
        self.handle_kills(result.kills)

    def begin(self, claim: Claim) -> None:
        run = Run(claim.task, claim.attempt)
        self.runs[claim.attempt.id] = run
        run.watcher = asyncio.create_task(self._supervise(run))

    async def _supervise(self, run: Run) -> None:
        task, attempt = run.task, run.attempt
        log_path = self.log_path(task, attempt)
        try:
            outcome = await self._execute(run, log_path)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not leave the task running forever
            log.exception("attempt crashed", extra={"task_id": task.id})
            outcome = Outcome(None, f"internal error: {exc}")
        await self.finish(run, outcome)

    async def _execute(self, run: Run, log_path: Path) -> Outcome:
        task, attempt = run.task, run.attempt
        if task.kind is Kind.CALLABLE:
            function = self.settings.registry.get(task.callable or "")
            if function is None:
                return Outcome(None, f"no callable named {task.callable!r} on this node")
            # Its start was recorded with the claim.
            run.inner = asyncio.create_task(self._call(function, run, log_path))
            self._apply_stop(run)
            try:
                return await self._keep_result(run, await run.inner)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                if self.stopping:
                    return Outcome(None, "interrupted: the node stopped")
                return Outcome(None, "stopped by request")
        settings = self.settings
        env = build_env(
            task, attempt, self.store.url, allow=settings.env_allow, api_url=settings.api_url
        )
        try:
            handle = await spawn(
                list(task.command),
                task.workspace,
                env,
                log_path,
                memory_mb=task.memory_mb,
                log_max_bytes=self.settings.log_max_bytes,
            )
        except SpawnError as exc:
            return Outcome(None, str(exc))
        run.handle = handle
        self._apply_stop(run)
        started = StartReport(
            attempt.id, attempt.token, handle.pid, handle.pid_started, str(log_path)
        )
        try:
            # A node that dies before this is committed finds the keeper by its pid file.
            await self._commit(started)
        except SlotlineError:
            # The attempt is no longer ours to run (or the store is gone while stopping):
            # never leave its process running unsupervised.
            await handle.stop("its start could not be recorded", self.settings.kill_grace)
            await handle.wait()
            raise
        return await self.wait(run, handle)

    async def _call(self, function: Entry, run: Run, log_path: Path) -> Outcome:
        task, attempt, settings = run.task, run.attempt, self.settings
        if not isinstance(function, FunctionRef):
            return await run_callable(function, task.args, task.timeout, log_path)
        env = build_env(
            task, attempt, self.store.url, allow=settings.env_allow, api_url=settings.api_url
        )

        def started(worker: ProcessHandle) -> None:
            run.worker = worker

        process = ProcessRun(
            env, log_path, task.timeout, settings.kill_grace, settings.log_max_bytes,
            task.memory_mb, task.workspace, started,
        )  # fmt: skip
        return await run_in_process(function, task.args, process)

    async def _keep_result(self, run: Run, outcome: Outcome) -> Outcome:
        """Store what a function returned before its end is reported (the end makes it
        the task's result); a result the store refuses fails the attempt. None (JSON
        null) is what a task without a result shows: nothing is written for it."""
        if outcome.result in (None, "null"):
            return outcome
        try:
            await self._with_retries(
                self.store.put_result, run.attempt.id, run.attempt.token, outcome.result
            )
        except InvalidInput as exc:
            return Outcome(1, str(exc))
        except StaleAttempt as exc:
            log.warning("result not kept: %s", exc, extra={"task_id": run.task.id})
        return outcome

    async def wait(self, run: Run, handle: ProcessHandle) -> Outcome:
        timeout = run.task.timeout
        if timeout is not None and run.attempt.started_at:
            timeout = max(0.0, run.attempt.started_at + timeout - self.now())
        waiting = asyncio.create_task(handle.wait())
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), timeout)
        except TimeoutError:
            await handle.stop(f"timed out after {run.task.timeout:g}s", self.settings.kill_grace)
            return await waiting

    async def finish(self, run: Run, outcome: Outcome, requeue: bool = False) -> None:
        """Commit the outcome. The run stays tracked until the store has it: a store that
        is briefly unreachable must not leave the task 'running' with nothing running."""
        run.finishing = True
        report = Report(
            run.attempt.id, run.attempt.token, outcome.exit_code, outcome.reason, requeue
        )
        try:
            await self._commit(report)
        except StaleAttempt as exc:
            log.warning("outcome not recorded: %s", exc, extra={"task_id": run.task.id})
        except SlotlineError:
            log.exception(
                "outcome not recorded; the next node start reconciles it",
                extra={"task_id": run.task.id},
            )
        finally:
            if self.runs.pop(run.attempt.id, None) is not None:
                self.changed.set()  # committed outside the loop: it refills the slot

    async def _commit(self, report: Report | StartReport) -> None:
        """Commit an outcome or a start: with the dispatch loop's next claim while the
        loop runs (one transaction and one wake-up for every report of a turn, and a slot
        an outcome freed refilled in the same commit), else on its own.

        Raises:
            SlotlineError: the store refused the report (a stale attempt).
        """
        if not self.dispatching or self.stopping:
            await self._commit_alone(report)
            return
        done: asyncio.Future[SlotlineError | None] = asyncio.get_running_loop().create_future()
        self._reports.append((report, done))
        self.changed.set()
        refused = await done
        if refused is not None:
            raise refused

    async def _commit_alone(self, report: Report | StartReport) -> None:
        if isinstance(report, StartReport):
            await self._with_retries(
                self.store.record_start,
                report.attempt_id,
                report.token,
                report.pid,
                report.pid_started,
                report.log_path,
            )
            return
        await self._with_retries(
            self.store.finish,
            report.attempt_id,
            report.token,
            report.exit_code,
            report.reason,
            requeue=report.requeue,
        )

    async def commit_pending(self) -> None:
        """Commit each report still waiting for the loop, on its own (the loop stopped)."""
        pending, self._reports = self._reports, []
        for report, done in pending:
            refused = None
            try:
                await self._commit_alone(report)
            except SlotlineError as exc:
                refused = exc
            if not done.done():  # its waiter may have been cancelled meanwhile
                done.set_result(refused)

    async def _with_retries(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Call a store verb, retrying while the store itself fails (not on refusals)."""
        delay = 0.1
        while True:
            try:
                return await asyncio.to_thread(function, *args, **kwargs)
            except StoreError:
                if self.stopping:
                    raise
                log.warning("store unavailable; retrying in %.1fs", delay, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def handle_kills(self, requests: list[KillRequest]) -> None:
        for request in requests:
            run = self.runs.get(request.attempt_id)
            if run is None or run.stopping:
                continue
            run.stopping = True
            run.stop_reason = request.request.stop_reason
            self._apply_stop(run)

    def _apply_stop(self, run: Run) -> None:
        """Stop a run whose stop was requested, if it has started; else `_execute` calls
        this again as soon as its process or callable exists (no request is lost)."""
        if run.stop_reason is None:
            return
        if run.handle is not None:
            stopping = run.handle.stop(run.stop_reason, self.settings.kill_grace)
            stopper = asyncio.create_task(stopping)
            self._stoppers.add(stopper)
            stopper.add_done_callback(self._stoppers.discard)
        elif run.inner is not None:
            run.inner.cancel()

    async def fence(self) -> None:
        """Stop the processes of attempts that another node finished meanwhile (this node
        was too slow to heartbeat and was taken for dead)."""
        live = {a.id for a in await asyncio.to_thread(self.store.live_attempts, self.node_id)}
        for run in list(self.runs.values()):
            if run.attempt.id in live or run.finishing or run.stopping:
                continue
            log.warning(
                "attempt finished by another node; stopping it here", extra={"task_id": run.task.id}
            )
            run.stopping = True
            run.stop_reason = "finished elsewhere: this node was taken for dead"
            self._apply_stop(run)

    async def sample_usage(self) -> None:
        """Record CPU% and RSS of each running command's (or function's worker's) whole
        process tree."""
        usage = {}
        for run in list(self.runs.values()):
            process = run.handle or run.worker
            if process is not None:
                sample = self.sampler.sample(process.pid, process.pid_started)
                if sample is not None:
                    usage[run.attempt.id] = (sample.cpu_percent, sample.rss)
        if usage:
            await asyncio.to_thread(self.store.record_usage, usage)

    async def shutdown(self) -> None:
        """Stop supervising. Processes keep running (a restarted node re-adopts them);
        callables cannot outlive the node: they are interrupted and their outcome recorded."""
        self.stopping = True
        await self.commit_pending()
        pending = []
        for run in list(self.runs.values()):
            if run.inner is not None:
                run.inner.cancel()
            elif run.watcher is not None:
                run.watcher.cancel()
            if run.watcher is not None:
                pending.append(run.watcher)
        await asyncio.gather(*pending, return_exceptions=True)
        self.runs.clear()
