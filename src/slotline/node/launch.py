"""Launching an attempt's work: a command's process (its environment, resume plan, worktree
and first input) or a registered function, in its own process or on the node's loop."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path

from slotline.fencing import Fence
from slotline.node.resume import ResumePlan, ResumeRefused, plan_resume
from slotline.node.run import Run, RunSettings
from slotline.runner.callable import Entry, run_callable
from slotline.runner.env import build_env
from slotline.runner.functions import FunctionRef, ProcessRun, run_in_process
from slotline.runner.process import Outcome, ProcessHandle, SpawnError, spawn
from slotline.runner.terminal import spawn_in_terminal
from slotline.runner.tmux import Terminal, TerminalError
from slotline.store import Store
from slotline.worktrees.isolate import Isolator
from slotline.worktrees.worktree import WorktreeError

# The node's logger: records keep the name they had before launching moved here.
log = logging.getLogger("slotline.node")


@dataclass(frozen=True)
class Launched:
    """A command's process, started, and the resume plan it was started from."""

    handle: ProcessHandle
    resume: ResumePlan | None


async def launch(
    store: Store,
    settings: RunSettings,
    isolator: Isolator,
    run: Run,
    log_path: Path,
    fence: Fence | None,
) -> Launched | Outcome:
    """Start the process of a command's `run`: the outcome of its attempt where it could
    not be started (its resume refused, its worktree or its spawn failed)."""
    task, attempt = run.task, run.attempt
    allow = settings.env_allow_of(task)
    env = build_env(task, attempt, store.url, allow=allow, api_url=settings.api_url)
    resume: ResumePlan | None = None
    if task.agent is not None:
        try:
            resume = await plan_resume(store, settings.agents, task, attempt)
        except ResumeRefused as exc:
            return Outcome(None, str(exc))
    cwd = task.workspace
    if task.isolation is not None:
        try:
            earlier = None if resume is None else resume.worktree
            start = None if resume is None else resume.start_from
            run.worktree, cwd = await isolator.open(task, attempt, env, earlier, start)
        except WorktreeError as exc:
            return Outcome(None, f"worktree: {exc}")
    run.resumed_session = None if resume is None else resume.session_id
    argv = resume.argv if resume is not None else list(task.command)
    try:
        if task.interactive:
            handle = await spawn_in_terminal(
                argv,
                cwd,
                env,
                log_path,
                settings.log_dir,
                memory_mb=task.memory_mb,
                log_max_bytes=settings.log_max_bytes,
                fence=fence_spec(fence, run),
            )
        else:
            handle = await spawn(
                argv,
                cwd,
                env,
                log_path,
                memory_mb=task.memory_mb,
                log_max_bytes=settings.log_max_bytes,
                fence=fence_spec(fence, run),
            )
    except SpawnError as exc:
        return Outcome(None, str(exc))
    return Launched(handle, resume)


async def type_first(run: Run, log_path: Path, text: str) -> None:
    """Type an interactive run's first message into its terminal (a line typed before
    its program reads waits in the terminal for it)."""
    terminal = Terminal.of(log_path)
    try:
        if terminal is None:
            raise TerminalError("its terminal file is missing")
        await asyncio.to_thread(terminal.send, text)
    except TerminalError as exc:
        log.warning("first input not typed: %s", exc, extra={"task_id": run.task.id})


async def call(
    function: Entry,
    store: Store,
    settings: RunSettings,
    run: Run,
    log_path: Path,
    fence: Fence | None,
) -> Outcome:
    """Run a function's `run`: on the node's loop, or in its own process (a `FunctionRef`),
    whose handle `run.worker` holds while it runs."""
    task, attempt = run.task, run.attempt
    if not isinstance(function, FunctionRef):
        return await run_callable(function, task.args, task.timeout, log_path)
    allow = settings.env_allow_of(task)
    env = build_env(task, attempt, store.url, allow=allow, api_url=settings.api_url)

    def started(worker: ProcessHandle) -> None:
        run.worker = worker

    process = ProcessRun(
        env, log_path, task.timeout, settings.kill_grace, settings.log_max_bytes,
        task.memory_mb, task.workspace, started, fence_spec(fence, run),
    )  # fmt: skip
    return await run_in_process(function, task.args, process)


def fence_spec(fence: Fence | None, run: Run) -> str:
    """The FENCE argument of the run's keeper: none where no other node reclaims."""
    if fence is None:
        return ""
    if run.claimed is None:
        raise RuntimeError(f"attempt {run.attempt.id} was not claimed by this node")
    return fence.spec(*run.claimed)
