"""The state machine of a task: which verb may move it from which status to which (a
running task asked to stop ends by its request's own verb: `stops.StopRequest`)."""

from __future__ import annotations

from slotline.errors import InvalidTransition
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
