"""What a node knows of each attempt it supervises (`Run`) and how it runs them
(`RunSettings`): the records `supervisor.py` and `adopt.py` work on."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slotline.config.agent_types import AgentType
from slotline.models import Attempt, Task
from slotline.runner.callable import Registry
from slotline.runner.env import allow_list
from slotline.runner.process import Outcome, ProcessHandle
from slotline.store import ClaimResult
from slotline.worktrees.isolation import Checkout


@dataclass(frozen=True, slots=True)
class Relayed:
    """A claim made where a run ended: what it did, and when it was sent and had
    committed (`fencing.clock`), the deadline of the runs it started."""

    result: ClaimResult
    claimed: tuple[float, float]


@dataclass
class Run:
    """One attempt this node supervises."""

    task: Task
    attempt: Attempt
    handle: ProcessHandle | None = None
    inner: asyncio.Task[Outcome] | None = None
    # A function's worker process (stopped through `inner`; sampled like a command).
    worker: ProcessHandle | None = None
    # A sync callable's thread (no task watches it: its end reports the outcome).
    thread: asyncio.Future[Any] | None = field(default=None, repr=False)
    # Why that thread's run ends badly once the thread returns (a timeout, a stop).
    thread_stopped: str | None = None
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    stopping: bool = False
    # A stop asked for before the process (or callable) existed, applied once it does.
    stop_reason: str | None = None
    finishing: bool = False
    watcher: asyncio.Task[None] | None = field(default=None, repr=False)
    # The run's git worktree (a task with `isolation: worktree`), once created.
    worktree: Checkout | None = None
    # Ended interrupted (its timeout, its node gone): its next attempt resumes it; and
    # the session it continues, if it resumed one (`node/resume.py`).
    resumable: bool = False
    resumed_session: str | None = None
    # Taken over from an earlier node (`adopt.py`): its output so far was that node's.
    adopted: bool = False
    # When the claim that took it was sent, and by when it had committed (`fencing.clock`):
    # its keeper's deadline. None: not claimed by this node (re-adopted).
    claimed: tuple[float, float] | None = None
    # A function run inside the node (its loop or a thread): no keeper fences it.
    in_node: bool = False
    # The claim its thread made as it ended (`node/relay.py`), for the loop to settle.
    relayed: Relayed | None = field(default=None, repr=False)


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
    # Where runs' git worktrees go (None: `worktrees` beside the log folder).
    worktree_dir: Path | None = None
    # The agent types of this node's configuration: their `usage` rules read what a run
    # spent at its end, their `resume` templates continue interrupted sessions.
    agents: Mapping[str, AgentType] = field(default_factory=dict)

    def env_allow_of(self, task: Task) -> tuple[str, ...]:
        """The node's allow-list, plus the variables of the task's agent type
        (`allow_list`): a key given to one type of agent is not handed to the others."""
        agent = self.agents.get(task.agent) if task.agent is not None else None
        return allow_list(self.env_allow, agent)
