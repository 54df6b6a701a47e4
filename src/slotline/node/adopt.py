"""Restart handling: re-adopt or finish this node's attempts, reap attempts of dead nodes,
and stop this node's runs that another node reaped meanwhile (fencing)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from pathlib import Path

from slotline.errors import SlotlineError, StaleAttempt
from slotline.models import Attempt, Kind
from slotline.node.reports import read_spent
from slotline.node.run import Run
from slotline.node.supervisor import Supervisor
from slotline.pacing.usage import Reading
from slotline.runner.process import (
    Outcome,
    ProcessHandle,
    describe_exit,
    process_start_time,
    read_exit_file,
    read_exit_status,
    read_fenced,
    unknown_exit,
)

# The node's logger: records keep the name they had before this code moved here.
log = logging.getLogger("slotline.node")


async def reconcile(supervisor: Supervisor) -> None:
    """Look at the attempts the store says this node runs: re-adopt live processes,
    finish dead ones from their exit file, or mark them interrupted."""
    for attempt in await asyncio.to_thread(supervisor.store.live_attempts, supervisor.node_id):
        if attempt.id in supervisor.runs:
            continue
        task = await asyncio.to_thread(supervisor.store.get, attempt.task_id)
        run = Run(task, attempt, adopted=True)
        log_path = supervisor.log_path(task, attempt)
        if attempt.log_path:
            log_path = Path(attempt.log_path)
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
                    supervisor.store.note_reconciled, task.id, attempt.id, "adopted", pid=pid
                )
                run.handle = handle
                supervisor.runs[attempt.id] = run
                run.watcher = asyncio.create_task(_adopted(supervisor, run, handle))
                continue
        code = read_exit_status(exit_path)
        fenced = read_fenced(log_path)
        never_spawned = (
            task.kind is Kind.COMMAND and pid is None and code is None
            and not log_path.with_suffix(".pid").exists()
        )  # fmt: skip
        if fenced is not None:
            # Its keeper stopped it (or never started it) while this node was down or
            # cut off for its lease: another node may have taken the task.
            action, outcome = "fenced", fenced
        elif code is not None:
            # It ended when its keeper wrote the exit file, not now: the time the node
            # was down is not the run's.
            ended_ago = _age(exit_path)
            action, outcome = "collected", Outcome(code, describe_exit(code), ended_ago=ended_ago)
            # Killed by a signal while no node watched it (not a stop slotline asked
            # for): interrupted, as a run whose keeper died with it.
            run.resumable = code < 0 and task.kill_request is None
        elif never_spawned:
            reason = "interrupted before its command started; queued again"
            action, outcome = "requeued", Outcome(None, reason)
        elif (unknown := unknown_exit(exit_path)).requeue:
            action, outcome = "requeued", unknown
        else:
            reason = "interrupted: the node stopped and the process is gone"
            action, outcome = "interrupted", Outcome(None, reason)
            run.resumable = True
        log.info(
            "finishing an attempt left by a stopped node",
            extra={"task_id": task.id, "reason": outcome.reason},
        )
        await asyncio.to_thread(
            supervisor.store.note_reconciled,
            task.id,
            attempt.id,
            action,
            exit_code=outcome.exit_code,
            reason=outcome.reason,
        )
        supervisor.runs[attempt.id] = run
        await supervisor.finish(run, outcome, requeue=outcome.requeue or never_spawned)


def _age(path: Path) -> float | None:
    """Seconds since `path` was last written (None if it cannot be read)."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime)
    except OSError:
        return None


async def _adopted(supervisor: Supervisor, run: Run, handle: ProcessHandle) -> None:
    outcome = await supervisor.wait(run, handle)
    await supervisor.finish(run, outcome, requeue=outcome.requeue)


async def reap_lapsed(supervisor: Supervisor) -> None:
    """Finish attempts of other nodes that are gone: the attempt's lease lapsed and its
    node has not heartbeated for a whole lease (both re-checked in the transaction).
    A node that was only slow finds its attempts finished and stops their processes
    (see `fence`), so a task never runs twice."""
    for attempt in await asyncio.to_thread(supervisor.store.live_attempts, None):
        if attempt.node_id == supervisor.node_id:
            continue
        if supervisor.fence is None and _keeper_alive(attempt):
            # Where keepers do not fence (SQLite: every node on this machine), a run whose
            # keeper lives is not reclaimed: its node collects it when it comes back.
            continue
        reading = await _read_reaped(supervisor, attempt)
        with contextlib.suppress(StaleAttempt):
            await asyncio.to_thread(
                functools.partial(
                    supervisor.store.finish,
                    attempt.id,
                    attempt.token,
                    None,
                    f"interrupted: node {attempt.node_id} stopped heartbeating",
                    reap_after=supervisor.settings.lease,
                    usage=reading.usage,
                    session_id=reading.session_id,
                    resumable=True,
                )
            )


def _keeper_alive(attempt: Attempt) -> bool:
    """Whether the attempt's keeper still runs on this machine (same pid and start)."""
    if attempt.pid is None or attempt.pid_started is None:
        return False
    log_path = Path(attempt.log_path or os.devnull)
    handle = ProcessHandle.adopt(attempt.pid, attempt.pid_started, log_path, log_path)
    return handle.alive()


async def fence(supervisor: Supervisor) -> None:
    """Stop the processes of attempts that another node finished meanwhile (this node
    was too slow to heartbeat and was taken for dead)."""
    store, node_id = supervisor.store, supervisor.node_id
    live = {a.id for a in await asyncio.to_thread(store.live_attempts, node_id)}
    for run in list(supervisor.runs.values()):
        if run.attempt.id in live or run.finishing or run.stopping:
            continue
        log.warning(
            "attempt finished by another node; stopping it here", extra={"task_id": run.task.id}
        )
        supervisor.stop(run, "finished elsewhere: this node was taken for dead")


async def _read_reaped(supervisor: Supervisor, attempt: Attempt) -> Reading:
    """What a reaped run spent and its session id, from its log when that is on this
    machine (its node ran here under another id); else nothing is known."""
    if not attempt.log_path or not os.path.isfile(attempt.log_path):
        return Reading()
    try:
        task = await asyncio.to_thread(supervisor.store.get, attempt.task_id, estimate=False)
    except SlotlineError:
        return Reading()
    return await read_spent(supervisor.settings.agents, Run(task, attempt), Path(attempt.log_path))


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
