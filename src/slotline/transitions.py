"""The state machine of a task: which verb may move it from which status to which, and
the typed request that stops a running one (its end applies that request's own verb)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from slotline.errors import InvalidInput, InvalidTransition
from slotline.models import PENDING, TERMINAL, Status

# The only statement of which status changes are legal. Keys are verbs, values map a
# current status to the status the verb leads to. The store checks every change here.
TRANSITIONS: dict[str, dict[Status, Status]] = {
    "claim": {Status.QUEUED: Status.RUNNING},
    "bump": {Status.QUEUED: Status.QUEUED, Status.HELD: Status.QUEUED},
    "succeed": {Status.RUNNING: Status.SUCCEEDED},
    "fail": {Status.RUNNING: Status.FAILED},
    "retry": {Status.RUNNING: Status.QUEUED},
    "cancel": {
        Status.WAITING: Status.CANCELLED,
        Status.QUEUED: Status.CANCELLED,
        Status.HELD: Status.CANCELLED,
        Status.BLOCKED: Status.CANCELLED,
        Status.RUNNING: Status.CANCELLED,
    },
    "expire": {
        Status.WAITING: Status.EXPIRED,
        Status.QUEUED: Status.EXPIRED,
        Status.HELD: Status.EXPIRED,
    },
    "unblock": {Status.WAITING: Status.QUEUED},
    # A task submitted held while waiting on dependencies: held once they succeeded.
    "unblock_held": {Status.WAITING: Status.HELD},
    "block": dict.fromkeys((Status.WAITING, Status.HELD, Status.QUEUED), Status.BLOCKED),
    "hold": {Status.QUEUED: Status.HELD},
    "release": {Status.HELD: Status.QUEUED},
    "restart": dict.fromkeys((*TERMINAL, Status.BLOCKED), Status.QUEUED),
    "reblock": {Status.BLOCKED: Status.WAITING},
    "terminate": {Status.RUNNING: Status.FAILED},
    # restart --force of a running task: it is stopped, then back in line.
    "restart_running": {Status.RUNNING: Status.QUEUED},
    # A new dependency keeps a waiting or queued task where it is, or sends it to
    # "wait" (queued → waiting) or "block" (a dependency that has ended badly).
    "add_dependency": {Status.WAITING: Status.WAITING, Status.QUEUED: Status.QUEUED},
    "wait": {Status.QUEUED: Status.WAITING},
    "boost": {Status.QUEUED: Status.QUEUED, Status.HELD: Status.HELD},
    "move": {Status.QUEUED: Status.QUEUED, Status.HELD: Status.HELD},
    "priority": {s: s for s in (*PENDING, Status.BLOCKED)},
}

# What to suggest when a verb does not apply to a status.
_HINTS: dict[tuple[str, Status], str] = {
    ("restart", Status.RUNNING): "cancel it first or use --force",
    ("restart", Status.QUEUED): "it is already queued",
    ("restart", Status.WAITING): "it is already waiting for its dependencies",
    ("terminate", Status.QUEUED): "use cancel for a task that has not started",
    ("cancel", Status.SUCCEEDED): "it has already ended",
    ("hold", Status.RUNNING): "terminate or cancel it instead",
    ("release", Status.QUEUED): "it is not held",
    ("bump", Status.RUNNING): "it is already running",
    ("boost", Status.RUNNING): "it is already running",
    ("move", Status.RUNNING): "it is already running",
    **{("add_dependency", s): "only a waiting or queued task can get one" for s in Status},
}


def check_transition(verb: str, task_id: str, status: Status) -> Status:
    """Return the status `verb` leads to from `status`, or raise InvalidTransition."""
    target = TRANSITIONS[verb].get(status)
    if target is None:
        hint = _HINTS.get((verb, status))
        if hint is None and status.terminal:
            hint = "it has ended; restart it first"
        if hint is None:
            allowed = ", ".join(sorted(TRANSITIONS[verb]))
            hint = f"{verb} applies to: {allowed}"
        raise InvalidTransition(
            f"cannot {verb} task {task_id[:8]}: it is {status}; {hint}",
            task_id=task_id,
            status=status,
        )
    return target


class StopKind(enum.StrEnum):
    """Why a running attempt is asked to stop; its task then ends by the verb of that name
    in TRANSITIONS ("restart" by "restart_running")."""

    CANCEL = "cancel"
    TERMINATE = "terminate"
    RESTART = "restart"


_STOP_OUTCOMES = {
    StopKind.CANCEL: "cancelled",
    StopKind.TERMINATE: "terminated",
    StopKind.RESTART: "restarted",
}


@dataclass(frozen=True, slots=True)
class StopRequest:
    """Someone asked a running attempt to stop: how its task ends once the process is gone.

    Stored (and shown over HTTP as `stop_requested`) as "cancel", "restart" or
    "terminate:REASON"; `str()` gives that form and `parse` reads it.
    """

    kind: StopKind
    reason: str | None = None  # terminate's, shown in the task's failure reason

    @classmethod
    def parse(cls, text: str | None) -> StopRequest | None:
        """The request stored as `text`, or None for none."""
        return None if text is None else cls.read(text)

    @classmethod
    def read(cls, text: str) -> StopRequest:
        kind, _, reason = text.partition(":")
        try:
            stop = StopKind(kind)
        except ValueError:
            raise InvalidInput(f"unknown stop request {text!r}") from None
        return cls(stop, reason if stop is StopKind.TERMINATE else None)

    @classmethod
    def terminate(cls, reason: str) -> StopRequest:
        return cls(StopKind.TERMINATE, reason)

    def __str__(self) -> str:
        if self.kind is StopKind.TERMINATE:
            return f"{self.kind}:{self.reason or ''}"
        return str(self.kind)

    @property
    def verb(self) -> str:
        """The TRANSITIONS verb that ends the run's task."""
        return "restart_running" if self.kind is StopKind.RESTART else str(self.kind)

    @property
    def outcome(self) -> str:
        """The attempt's outcome: cancelled, terminated or restarted."""
        return _STOP_OUTCOMES[self.kind]

    @property
    def stop_reason(self) -> str:
        """Why the run stopped, in words: "cancelled", "terminated: REASON", "restarted"."""
        if self.kind is StopKind.TERMINATE:
            return f"terminated: {self.reason}"
        return self.outcome


CANCEL = StopRequest(StopKind.CANCEL)
RESTART = StopRequest(StopKind.RESTART)
