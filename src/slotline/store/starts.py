"""A claim's start of one task: the attempt the node runs it as, the task's row and its
events, as one claim's transaction writes them (`store/claim.py` decides what starts)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

from slotline.models import Attempt, Kind, Status, Task, copy_task
from slotline.runlogs import log_file
from slotline.scheduler import policy
from slotline.store.events import change, emit
from slotline.store.queries import Tx
from slotline.transitions import check_transition


@dataclass(frozen=True, slots=True)
class Claim:
    """A task the calling node now runs, and the attempt it runs it as."""

    task: Task
    attempt: Attempt


def start(
    tx: Tx,
    planned: policy.Start[Task],
    node_id: str,
    now: float,
    lease: float,
    log_dir: Path | None,
) -> Claim:
    """Start the task `planned` at `now` on `node_id`: its attempt (leased for `lease`
    seconds; a callable's log file in `log_dir`, as it starts with the claim), the task's
    row and its events; the task and attempt as a read of them would return them."""
    task = planned.task  # as read by this transaction
    check_transition("claim", task.id, task.status)
    number = task.attempt_count + 1
    log_path = None
    if log_dir is not None and task.kind is Kind.CALLABLE:
        log_path = log_file(log_dir, task.id, number)
    attempt = Attempt(
        id=secrets.token_hex(16),
        task_id=task.id,
        number=number,
        token=secrets.token_urlsafe(24),
        node_id=node_id,
        pid=None,
        pid_started=None,
        started_at=now,
        finished_at=None,
        exit_code=None,
        outcome=None,
        reason=None,
        over_limit=planned.over_limit,
        lease_expires_at=now + lease,
        log_path=log_path,
    )
    attempt_id = attempt.id
    tx.run(
        "attempt_insert",
        id=attempt_id,
        task_id=task.id,
        number=number,
        token=attempt.token,
        node_id=node_id,
        now=now,
        over_limit=planned.over_limit,
        lease_expires_at=attempt.lease_expires_at,
        log_path=log_path,
    )
    tx.run("task_claim", id=task.id, now=now, attempt_id=attempt_id)
    change(
        tx,
        task,
        "claimed",
        Status.RUNNING,
        now,
        attempt=attempt_id,
        number=number,
        node=node_id,
        over_limit=planned.over_limit,
    )
    if log_path is not None:
        # A callable starts with its claim; its log path went in with the attempt's row.
        emit(tx, "started", task.id, now, attempt=attempt_id, pid=None)
    # The task as `task_claim` left it (a contract test compares it with a fresh read).
    claimed = copy_task(
        task,
        status=Status.RUNNING,
        status_reason=None,
        start_now=False,
        boosted=False,
        started_at=now,
        finished_at=None,
        exit_code=None,
        failure_reason=None,
        not_before=None,
        kill_request=None,
        attempt_count=number,
        current_attempt=attempt_id,
    )
    return Claim(claimed, attempt)
