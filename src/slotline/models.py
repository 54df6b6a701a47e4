"""Domain values: tasks, attempts, events, states and priorities (the moves between
states are in `slotline.transitions`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from slotline.clock import iso
from slotline.errors import InvalidInput
from slotline.frozen import Copier
from slotline.limits import limit_key_value
from slotline.sessions import SESSION_PLACEHOLDER, refused_tools

if TYPE_CHECKING:
    from slotline.stops import StopRequest
    from slotline.worktrees.isolation import Isolation, Worktree


class Status(enum.StrEnum):
    """Where a task is in its life (DESIGN §2)."""

    WAITING = "waiting"
    QUEUED = "queued"
    HELD = "held"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    BLOCKED = "blocked"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.EXPIRED})
# A dependency in one of these states will never succeed without a restart.
BAD_ENDS = frozenset({Status.FAILED, Status.CANCELLED, Status.EXPIRED, Status.BLOCKED})
# States that make up "the line": tasks not yet started and not finished.
PENDING = frozenset({Status.WAITING, Status.QUEUED, Status.HELD})


class Priority(enum.IntEnum):
    """Lower value runs first."""

    URGENT = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3

    @classmethod
    def parse(cls, value: str | int | Priority) -> Priority:
        """Accept a name (`urgent`), an alias (`P0`, `medium`) or a number 0..3."""
        if isinstance(value, Priority):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                raise InvalidInput(f"priority must be 0..3, got {value}") from None
        text = str(value).strip().lower()
        if text in _PRIORITY_ALIASES:
            return _PRIORITY_ALIASES[text]
        choices = "urgent, high, normal, low (or P0..P3, medium)"
        raise InvalidInput(f"unknown priority {value!r}; use one of {choices}")

    @property
    def label(self) -> str:
        return self.name.lower()


_PRIORITY_ALIASES: dict[str, Priority] = {
    **{p.name.lower(): p for p in Priority},
    **{f"p{p.value}": p for p in Priority},
    "medium": Priority.NORMAL,
}
# Every name `Priority.parse` takes (in any case), for the HTTP schema's pattern.
PRIORITY_WORDS = tuple(_PRIORITY_ALIASES)


class Kind(enum.StrEnum):
    """What executes a task."""

    COMMAND = "command"
    CALLABLE = "callable"
    EXTERNAL = "external"


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run spent, as its agent type's `usage` rules read it from its output; a
    value nothing matched is None."""

    cost_usd: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    # The values the agent printed as its session's running totals (`usage:
    # {session_totals: [KEY, …]}`), by key: a run that continued a session records each
    # key as this less the total recorded before it.
    session_totals: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cost_usd": self.cost_usd,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "session_totals": self.session_totals,
        }


@dataclass(frozen=True, slots=True)
class ResumedFrom:
    """The attempt whose agent session a run continued (its task's own, or, for a
    follow-up, the followed task's) through its agent type's `resume` template, and that
    session (known to the node that starts the run; not read back)."""

    task_id: str
    attempt: int
    session_id: str | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "attempt": self.attempt}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One execution of a task."""

    id: str
    task_id: str
    number: int
    token: str
    node_id: str | None
    pid: int | None
    pid_started: float | None
    started_at: float
    finished_at: float | None
    exit_code: int | None
    outcome: str | None
    reason: str | None
    over_limit: bool
    lease_expires_at: float | None
    log_path: str | None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    peak_cpu_percent: float | None = None
    peak_rss_bytes: int | None = None
    # The run's git worktree (tasks with `isolation: worktree`), see `Worktree`.
    worktree: Worktree | None = None
    # What the run spent and the agent's session id, read from its output at its end.
    usage: Usage | None = None
    session_id: str | None = None
    # Ended interrupted (node gone, timeout, terminate --resumable): the next attempt
    # continues its session; and the session this run continued, if it did.
    resumable: bool = False
    resumed_from: ResumedFrom | None = None
    # The tool uses its agent was refused (its permission mode), one name per refusal.
    denied_tools: tuple[str, ...] = ()

    @property
    def denied(self) -> str | None:
        """What the agent was refused, in words (`refused_tools`)."""
        return refused_tools(self.denied_tools)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape; never includes the secret token."""
        return {
            "id": self.id,
            "number": self.number,
            "node_id": self.node_id,
            "pid": self.pid,
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "exit_code": self.exit_code,
            "outcome": self.outcome,
            "reason": self.reason,
            "over_limit": self.over_limit,
            "log_path": self.log_path,
            "cpu_percent": self.cpu_percent,
            "rss_bytes": self.rss_bytes,
            "peak_cpu_percent": self.peak_cpu_percent,
            "peak_rss_bytes": self.peak_rss_bytes,
            "worktree": None if self.worktree is None else self.worktree.to_dict(),
            "usage": None if self.usage is None else self.usage.to_dict(),
            "session_id": self.session_id,
            "resumable": self.resumable,
            "resumed_from": None if self.resumed_from is None else self.resumed_from.to_dict(),
            "denied_tools": list(self.denied_tools),
        }


@dataclass(frozen=True, slots=True)
class WaitingReason:
    """Why a task in line does not start now, as dispatch would decide it (the policy's
    walk records it, `scheduler/policy.plan`): a kind (`slots`, `limit`, `rate`,
    `budget`, `backoff`, `held`, `dependency`, `start_time`, `paused`, `guard`,
    `no_node`, `unserved`), a sentence, and when it frees (epoch seconds; None: not known)."""

    kind: str
    text: str
    until: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "until": iso(self.until)}


@dataclass(frozen=True, slots=True)
class Task:
    """A unit of work as stored. `position` is filled in by queue reads only."""

    id: str
    kind: Kind
    command: tuple[str, ...]
    callable: str | None
    args: dict[str, Any]
    title: str
    agent: str | None
    workspace: str | None
    user: str | None
    labels: dict[str, str]
    env: dict[str, str]
    priority: Priority
    boosted: bool
    start_now: bool
    rank: str
    status: Status
    status_reason: str | None
    depends_on: tuple[str, ...]
    parent_id: str | None
    depth: int
    max_attempts: int
    backoff: float
    timeout: float | None
    queue_ttl: float | None
    not_before: float | None
    kill_request: StopRequest | None
    restart_requested: bool
    created_at: float
    queued_at: float | None
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    failure_reason: str | None
    attempt_count: int
    attempt_base: int
    current_attempt: str | None
    memory_mb: int | None = None
    expected_duration: float | None = None
    hold_when_ready: bool = False
    # The idempotency key, the start time asked for (a delayed task), and the recurring
    # schedule that submitted the task.
    key: str | None = None
    run_at: float | None = None
    schedule: str | None = None
    # The git repository the task works on (a limit key), and whether it runs in a
    # worktree of it (`isolation: worktree`).
    repo: str | None = None
    isolation: Isolation | None = None
    # Since when its run has printed nothing (or its waiting pattern); None: not stalled.
    stalled_at: float | None = None
    # Its command runs in a terminal people attach to (`runner/terminal.py`), and since
    # when that terminal has been quiet while the run waits on it (None: it does not).
    interactive: bool = False
    needs_input_at: float | None = None
    # What is typed into its terminal as its run starts (None: nothing).
    first_input: str | None = None
    # Since when its run has given its slot back while it needs input (the limits do
    # not count it meanwhile: `release_while_idle`); None: it holds one if it runs.
    slot_released: float | None = None
    attempts: tuple[Attempt, ...] = ()
    position: int | None = None
    # What a succeeded function task returned (JSON), filled in by single-task reads.
    result: Any = None
    # Estimates filled in by queue reads (scheduler/eta.py); None when unknown. Derived
    # from the clock, not state: two reads of an unchanged task compare equal.
    eta_start: float | None = field(default=None, compare=False)
    eta_finish: float | None = field(default=None, compare=False)
    eta_basis: str | None = field(default=None, compare=False)
    # Why a task in line has no estimate when one could not be made (the answer degrades,
    # it does not fail); None otherwise.
    eta_unavailable: str | None = field(default=None, compare=False)
    # A running task that has run longer than its expected run time (queue reads).
    eta_overdue: bool = field(default=False, compare=False)
    # Filled in by queue reads: why a task in line does not start now (None: it would).
    waiting_reason: WaitingReason | None = field(default=None, compare=False)
    # Filled in by queue reads: the task is NEXT UP, expected to start first (`next_up`).
    next_up: bool = field(default=False, compare=False)
    # Filled in by queue reads: a queued task that a reached budget holds, the moment
    # every budget holding it has room again (its `status_reason` says which); None: no
    # budget holds it.
    budget_until: float | None = field(default=None, compare=False)
    # Set by submit only: the task already existed with this key (nothing was created).
    deduplicated: bool = field(default=False, compare=False)

    @property
    def holds_slot(self) -> bool:
        """Whether the limits count it: it runs, and has not given its slot back."""
        return self.status is Status.RUNNING and self.slot_released is None

    def key_value(self, key: str) -> str | None:
        """The value of a limit key (`agent`, `workspace`, `user`, `label:NAME`) for this task."""
        return limit_key_value(self, key)

    @property
    def command_run(self) -> tuple[str, ...]:
        """The command as its latest run that continued a session ran it: a follow-up's
        placeholder of that session (`session_placeholder`) filled with it. Before such a
        run, the command as stored."""
        resumed = [a for a in self.attempts if a.resumed_from and a.session_id]
        if not resumed:
            return self.command
        session = resumed[-1].session_id
        assert session is not None
        return tuple(SESSION_PLACEHOLDER.sub(lambda _m: session, arg) for arg in self.command)

    def to_dict(self) -> dict[str, Any]:
        """The stable JSON shape documented in docs/cli.md."""
        return {
            "id": self.id,
            "kind": self.kind.value,
            "title": self.title,
            "command": list(self.command_run),
            "callable": self.callable,
            "agent": self.agent,
            "workspace": self.workspace,
            "user": self.user,
            "labels": dict(self.labels),
            "status": self.status.value,
            "status_reason": self.status_reason,
            "budget_until": iso(self.budget_until),
            "priority": self.priority.label,
            "boosted": self.boosted,
            "position": self.position,
            "eta_start": iso(self.eta_start),
            "eta_finish": iso(self.eta_finish),
            "eta_basis": self.eta_basis,
            "eta_unavailable": self.eta_unavailable,
            "eta_overdue": self.eta_overdue,
            "next_up": self.next_up,
            "waiting_reason": self.waiting_reason and self.waiting_reason.to_dict(),
            "depends_on": list(self.depends_on),
            "parent_id": self.parent_id,
            "max_attempts": self.max_attempts,
            "timeout": self.timeout,
            "queue_ttl": self.queue_ttl,
            "memory_mb": self.memory_mb,
            "expected_duration": self.expected_duration,
            "not_before": iso(self.not_before),
            "key": self.key,
            "run_at": iso(self.run_at),
            "schedule": self.schedule,
            "created_at": iso(self.created_at),
            "queued_at": iso(self.queued_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "exit_code": self.exit_code,
            "failure_reason": self.failure_reason,
            "result": self.result,
            "repo": self.repo,
            "isolation": None if self.isolation is None else self.isolation.to_dict(),
            "stalled_at": iso(self.stalled_at),
            "interactive": self.interactive,
            "first_input": self.first_input,
            "needs_input_at": iso(self.needs_input_at),
            "slot_released": iso(self.slot_released),
            "attempts": [a.to_dict() for a in self.attempts],
        }


# `dataclasses.replace` of a task at half its cost (`slotline.frozen`): a claim copies
# each task it starts, and a read each task it places in line or gives an estimate.
copy_task: Copier[Task] = Copier(Task)


@dataclass(frozen=True, slots=True)
class KillRequest:
    """A running attempt on a node that someone asked to stop."""

    task_id: str
    attempt_id: str
    pid: int | None
    request: StopRequest


@dataclass(frozen=True, slots=True)
class Event:
    """An immutable, numbered record of a change."""

    seq: int
    at: float
    kind: str
    task_id: str | None
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": iso(self.at),
            "kind": self.kind,
            "task_id": self.task_id,
            "data": self.data,
        }


@dataclass(frozen=True, slots=True)
class TaskPage:
    """One page of the task list.

    `next_after` is the id of the page's last task when more follow (pass it as `after`
    to read the next page), else None; `total` counts every task that matches the
    filter, when it was asked for."""

    tasks: list[Task]
    next_after: str | None
    total: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "tasks": [t.to_dict() for t in self.tasks],
            "next_after": self.next_after,
            "total": self.total,
        }
