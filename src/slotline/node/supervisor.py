"""Per-attempt supervision: start a claimed attempt, watch it, stop it on request, finish it."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slotline.errors import SlotlineError, StaleAttempt
from slotline.fencing import Fence
from slotline.models import Attempt, KillRequest, Kind, Task
from slotline.node.launch import call, launch, type_first
from slotline.node.outbox import Batch, Outbox
from slotline.node.relay import Relay, end_in_thread, settle
from slotline.node.reports import end_report, keep_result, note_fenced, read_spent, resumable
from slotline.node.run import Relayed, Run, RunSettings
from slotline.runlogs import log_file
from slotline.runner.callable import TaskFunction, start_in_thread, thread_outcome
from slotline.runner.functions import FunctionRef
from slotline.runner.process import IN_NODE_FENCED, Outcome, ProcessHandle, stale_claim
from slotline.runner.space import SpaceWatch
from slotline.store import Claim, ClaimResult, StartReport, Store
from slotline.worktrees.isolate import Isolator
from slotline.worktrees.orphans import default_root

# The node's logger: records keep the name they had before supervision moved here.
log = logging.getLogger("slotline.node")


class Supervisor:
    """A node's attempts: start each claimed one, watch it, stop it on request, report its
    outcome. The node owns one; `node/adopt.py` re-adopts attempts through it."""

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
        # The starts and outcomes of runs on their way to the store.
        self.outbox = Outbox(store, changed)
        root = settings.worktree_dir or default_root(settings.log_dir)
        self.isolator = Isolator(store, root, self.outbox.retrying)
        # Holds new starts while the log directory is full (`SpaceWatch`).
        self.space = SpaceWatch(settings.log_dir)
        self._stoppers: set[asyncio.Task[None]] = set()
        # Claimed runs being put back in line as the node stops (`relay.settle`).
        self.putting_back: set[asyncio.Task[None]] = set()
        # Set by the node where other nodes may reclaim its runs: their keepers fence them.
        self.fence: Fence | None = None
        # Set by the node: its claims, and the claims made where a function's run ended
        # (`node/relay.py`), with what the node does after one (on the loop).
        self.relay: Relay | None = None
        self.relayed: Callable[[Relayed], None] | None = None

    @property
    def stopping(self) -> bool:
        return self.outbox.stopping

    def log_path(self, task: Task, attempt: Attempt) -> Path:
        return Path(log_file(self.settings.log_dir, task.id, attempt.number))

    def log_of(self, run: Run) -> Path:
        """The run's log file: as its claim recorded it (a callable's), else this node's."""
        attempt = run.attempt
        return Path(attempt.log_path) if attempt.log_path else self.log_path(run.task, attempt)

    # -- the dispatch loop's side -------------------------------------------------------

    def settle(
        self, batch: Batch, result: ClaimResult, claimed: tuple[float, float] | None = None
    ) -> None:
        """After a claim committed `batch` (`claimed`: when it was sent and when it had
        committed, on `fencing.clock`): answer its waiters, start what it claimed and stop
        what someone asked to stop."""
        for (_, done), refused in zip(batch.starts, result.recorded, strict=True):
            if not done.done():  # its waiter may have been cancelled meanwhile
                done.set_result(refused)
        for (end, done), refused in zip(batch.ends, result.finished, strict=True):
            # The claim refilled the slot: the run is over for the loop's bookkeeping.
            self.runs.pop(end.attempt_id, None)
            if not done.done():
                done.set_result(refused)
        for claim in result.claims:
            self.begin(claim, claimed)
        self.handle_kills(result.kills)

    def begin(self, claim: Claim, claimed: tuple[float, float] | None = None) -> None:
        run = Run(claim.task, claim.attempt, claimed=claimed)
        self.runs[claim.attempt.id] = run
        if claim.task.kind is Kind.CALLABLE:
            function = self.settings.registry.get(claim.task.callable or "")
            run.in_node = function is not None and not isinstance(function, FunctionRef)
            if run.in_node and not inspect.iscoroutinefunction(function):
                if self._stale(run):  # a thread cannot be stopped once started
                    run.watcher = asyncio.create_task(self.finish(run, stale_claim()))
                    return
                self._begin_in_thread(run, function)  # type: ignore[arg-type]
                return
        run.watcher = asyncio.create_task(self._supervise(run))

    def _begin_in_thread(self, run: Run, function: TaskFunction) -> None:
        """Start a sync callable (its start was recorded with the claim). No task watches
        it: the end of its thread reports the outcome, so a short callable costs the loop
        a thread hop and a report, not a supervising task, a thread task and its waits."""
        then = None if self.relay is None else functools.partial(end_in_thread, self, run)
        run.thread = start_in_thread(function, run.task.args, then)
        run.thread.add_done_callback(functools.partial(self._thread_ended, run))
        timeout = run.task.timeout
        if timeout is not None:
            reason = f"timed out after {timeout:g}s"
            loop = asyncio.get_running_loop()
            run.timer = loop.call_later(timeout, self._stop_thread, run, reason)

    def _stop_thread(self, run: Run, reason: str) -> None:
        """A thread cannot be interrupted: the run ends with `reason` once it returns
        (and holds its slot until then, so a limit is never exceeded)."""
        if run.thread_stopped is None:
            run.thread_stopped = reason

    def _thread_ended(self, run: Run, work: asyncio.Future[Any]) -> None:
        if run.timer is not None:
            run.timer.cancel()
        if run.relayed is not None:
            settle(self, run, run.relayed)
            return
        try:
            outcome = thread_outcome(work, run.thread_stopped, lambda: self.log_of(run))
        except Exception as exc:  # a bug (or a full disk) must not leave the task running
            log.exception("attempt crashed", extra={"task_id": run.task.id})
            outcome = Outcome(None, f"internal error: {exc}")
        if outcome.result not in (None, "null") or not self.outbox.batched:
            # A result is kept before the end is reported (`reports.keep_result`), in a task.
            run.watcher = asyncio.create_task(self._finish_kept(run, outcome))
            return
        run.finishing = True
        ended = self.outbox.enqueue(end_report(run, outcome, False, None, self.log_of(run)))
        ended.add_done_callback(functools.partial(self._ended, run))

    async def _finish_kept(self, run: Run, outcome: Outcome) -> None:
        try:
            outcome = await keep_result(self.outbox, run, outcome)
        except Exception as exc:  # as in `_supervise`: the run must end, its slot free
            log.exception("attempt crashed", extra={"task_id": run.task.id})
            outcome = Outcome(None, f"internal error: {exc}")
        await self.finish(run, outcome)

    def _ended(self, run: Run, done: asyncio.Future[SlotlineError | None]) -> None:
        refused = None if done.cancelled() else done.result()
        self.release(run, refused)

    async def _supervise(self, run: Run) -> None:
        task = run.task
        log_path = self.log_of(run)
        try:
            outcome = await self._execute(run, log_path)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug must not leave the task running forever
            log.exception("attempt crashed", extra={"task_id": task.id})
            outcome = Outcome(None, f"internal error: {exc}")
        await self.finish(run, outcome, requeue=outcome.requeue)

    async def _execute(self, run: Run, log_path: Path) -> Outcome:
        task, attempt = run.task, run.attempt
        if self._stale(run):
            return stale_claim()
        if task.kind is Kind.CALLABLE:
            function = self.settings.registry.get(task.callable or "")
            if function is None:
                return Outcome(None, f"no callable named {task.callable!r} on this node")
            # Its start was recorded with the claim.
            run.inner = asyncio.create_task(
                call(function, self.store, self.settings, run, log_path, self.fence)
            )
            self._apply_stop(run)
            try:
                return await keep_result(self.outbox, run, await run.inner)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                if self.stopping:
                    return Outcome(None, "interrupted: the node stopped")
                if run.stop_reason == IN_NODE_FENCED:
                    return Outcome(None, IN_NODE_FENCED, fenced=True)
                return Outcome(None, "stopped by request")
        launched = await launch(self.store, self.settings, self.isolator, run, log_path, self.fence)
        if isinstance(launched, Outcome):
            return launched
        handle, resume = launched.handle, launched.resume
        run.handle = handle
        self._apply_stop(run)
        if task.interactive and task.first_input:
            await type_first(run, log_path, task.first_input)
        started = StartReport(
            attempt.id, attempt.token, handle.pid, handle.pid_started, str(log_path),
            None if resume is None else resume.resumed_from,
        )  # fmt: skip
        if self.outbox.batched:
            # With a later claim of the loop, while the process runs; a node that dies
            # before that commit finds the keeper by its pid file.
            recorded = self.outbox.enqueue(started, wake=False)
            recorded.add_done_callback(functools.partial(self._start_recorded, run))
            return await self.wait(run, handle)
        try:
            await self.outbox.commit_alone(started)
        except SlotlineError:
            # The attempt is no longer ours to run (or the store is gone while stopping):
            # never leave its process running unsupervised.
            await handle.stop("its start could not be recorded", self.settings.kill_grace)
            await handle.wait()
            raise
        return await self.wait(run, handle)

    def _stale(self, run: Run) -> bool:
        """Whether the run's claim is too old to start (`slotline.fencing`): its node
        froze or was cut off since, and another node may have taken the task."""
        return (
            self.fence is not None and run.claimed is not None and self.fence.lapsed(*run.claimed)
        )

    def fence_in_node(self) -> None:
        """Stop the runs inside this node (functions on its loop or threads, which have
        no keeper) once their deadline passed. A thread cannot be stopped: it ends with
        the fenced reason once it returns."""
        for run in list(self.runs.values()):
            if run.in_node and not (run.stopping or run.finishing) and self._stale(run):
                log.warning("fencing a function run in the node", extra={"task_id": run.task.id})
                self.stop(run, IN_NODE_FENCED)

    def _start_recorded(self, run: Run, done: asyncio.Future[SlotlineError | None]) -> None:
        refused = None if done.cancelled() else done.result()
        if refused is None or run.stopping:
            return
        # The attempt is no longer ours to run: never leave its process unsupervised.
        log.warning("start not recorded, stopping it: %s", refused, extra={"task_id": run.task.id})
        self.stop(run, "its start could not be recorded")

    async def wait(self, run: Run, handle: ProcessHandle) -> Outcome:
        timeout = run.task.timeout
        if timeout is None:
            return await handle.wait()
        if run.attempt.started_at:
            timeout = max(0.0, run.attempt.started_at + timeout - self.now())
        waiting = asyncio.create_task(handle.wait())
        try:
            return await asyncio.wait_for(asyncio.shield(waiting), timeout)
        except TimeoutError:
            run.resumable = True  # a run cut short: its next attempt may resume it
            await handle.stop(f"timed out after {run.task.timeout:g}s", self.settings.kill_grace)
            return await waiting

    async def finish(self, run: Run, outcome: Outcome, requeue: bool = False) -> None:
        """Commit the outcome, with what the run spent as its agent type's `usage` rules
        read it from the end of its log. The run stays tracked until the store has it: a
        store that is briefly unreachable must not leave the task 'running' with nothing
        running."""
        run.finishing = True
        if outcome.fenced:
            run.resumable = True  # cut short by its keeper: the next attempt may resume it
        if outcome.requeue:  # its exit status could not be written: the disk is full
            self.space.saw_full()
        refused = None
        reading = await read_spent(self.settings.agents, run, self.log_of(run))
        if run.task.isolation is not None:  # closed before the outcome is committed
            keep = reading.session_id is not None and await resumable(self.store, run)
            await self.isolator.close(
                run.task, run.attempt, run.worktree, outcome, requeue, resumable=keep
            )
        try:
            await self.outbox.commit(end_report(run, outcome, requeue, reading, self.log_of(run)))
        except SlotlineError as exc:
            refused = exc
        finally:
            self.release(run, refused)
            if run.task.isolation is not None:
                self.isolator.closed.set()  # now finished, its worktree may be pruned
        if outcome.fenced:
            reclaimed = isinstance(refused, StaleAttempt)
            await note_fenced(self.store, self.node_id, run, outcome, reclaimed)

    def release(self, run: Run, refused: SlotlineError | None) -> None:
        """After an outcome's commit (or its refusal): the run is over."""
        self.log_refusal(run, refused)
        if self.runs.pop(run.attempt.id, None) is not None:
            self.changed.set()  # committed outside the loop: it refills the slot

    def log_refusal(self, run: Run, refused: SlotlineError | None) -> None:
        if isinstance(refused, StaleAttempt):
            log.warning("outcome not recorded: %s", refused, extra={"task_id": run.task.id})
        elif refused is not None:
            log.error(
                "outcome not recorded; the next node start reconciles it",
                exc_info=refused,
                extra={"task_id": run.task.id},
            )

    def handle_kills(self, requests: list[KillRequest]) -> None:
        for request in requests:
            run = self.runs.get(request.attempt_id)
            if run is None or run.stopping:
                continue
            self.stop(run, request.request.stop_reason)

    def stop(self, run: Run, reason: str) -> None:
        """Stop `run` for `reason` (its outcome says it), now or as soon as it exists."""
        run.stopping = True
        run.stop_reason = reason
        self._apply_stop(run)

    def _apply_stop(self, run: Run) -> None:
        """Stop a run whose stop was requested, if it has started; else `_execute` calls
        this again as soon as its process or callable exists (no request is lost)."""
        if run.stop_reason is None:
            return
        if run.thread is not None:
            interrupted = "interrupted: the node stopped" if self.stopping else None
            self._stop_thread(run, interrupted or "stopped by request")
        elif run.handle is not None:
            stopping = run.handle.stop(run.stop_reason, self.settings.kill_grace)
            stopper = asyncio.create_task(stopping)
            self._stoppers.add(stopper)
            stopper.add_done_callback(self._stoppers.discard)
        elif run.inner is not None:
            run.inner.cancel()

    async def shutdown(self) -> None:
        """Stop supervising. Processes keep running (a restarted node re-adopts them);
        callables cannot outlive the node: they are interrupted and their outcome recorded."""
        if self.relay is not None:
            self.relay.open = False
        await self.outbox.close()
        while threads := [
            run.thread for run in self.runs.values() if run.thread and not run.thread.done()
        ]:
            for run in self.runs.values():
                if run.thread is not None and not run.thread.done():
                    self._stop_thread(run, "interrupted: the node stopped")
            await asyncio.wait(threads)
            # Let the ends of threads report (each in a task now that the loop has
            # stopped); a claim one made as it ended may have started more of them.
            await asyncio.sleep(0)
        await asyncio.gather(*self.putting_back, return_exceptions=True)
        pending = []
        for run in list(self.runs.values()):
            if run.inner is not None:
                run.inner.cancel()
            elif run.watcher is not None and run.thread is None:
                run.watcher.cancel()  # a thread's watcher commits its outcome: let it
            if run.watcher is not None:
                pending.append(run.watcher)
        await asyncio.gather(*pending, return_exceptions=True)
        self.runs.clear()
