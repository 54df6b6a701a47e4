"""A run's life after its claim: its start recorded, its lease renewed (external runners),
its outcome committed, and the task retried, ended, expired or put back in line.

The steps are functions over the caller's transaction, so that a claim commits the
reports of a node's loop turn (`claim.py`) as `record_start` and `finish` would."""

from __future__ import annotations

import random
from dataclasses import dataclass

from slotline import fencing
from slotline.bounds import parse_id
from slotline.errors import InvalidInput, NotFound, StaleAttempt
from slotline.models import Attempt, Kind, ResumedFrom, Status, Task, Usage
from slotline.sessions import refused_tools
from slotline.stops import StopKind
from slotline.store import backoff, deps, results, windows
from slotline.store.core import Serial, StoreCore
from slotline.store.events import change, emit
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row
from slotline.store.settings import LEASE_SECONDS, read_settings
from slotline.store.tasks import load
from slotline.tasktoken import same_token
from slotline.transitions import check_transition

# The keeper's exit code when the program cannot be executed (as a shell's).
EXEC_FAILED = 127


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of an attempt whose process has exited, as its node reports it
    (the arguments of `finish`)."""

    attempt_id: str
    token: str
    exit_code: int | None
    reason: str | None = None
    requeue: bool = False
    # The end of a failed run's output, for an agent type's back-off pattern.
    output: str | None = None
    # What the run spent and its agent's session id, read from its output.
    usage: Usage | None = None
    session_id: str | None = None
    # The run was interrupted (its node died, its timeout): its next attempt resumes it.
    resumable: bool = False
    # The tool uses its agent was refused, one name per refusal (`pacing/usage.py`).
    denied: tuple[str, ...] = ()
    # How many seconds before the report the process ended, when that was found later
    # (a node restarted after it: the exit file's age); None: just now.
    ended_ago: float | None = None


@dataclass(frozen=True, slots=True)
class StartReport:
    """A command's process once spawned, as its node reports it (the arguments of
    `record_start`)."""

    attempt_id: str
    token: str
    pid: int | None
    pid_started: float | None
    log_path: str | None
    # The session the run continues, through its agent type's `resume` template.
    resumed_from: ResumedFrom | None = None


class RunVerbs(StoreCore):
    """How a running attempt is reported: its process recorded, its lease renewed, its
    outcome committed (and the task retried, ended or put back in line)."""

    def record_start(
        self,
        attempt_id: str,
        token: str,
        pid: int | None,
        pid_started: float | None = None,
        log_path: str | None = None,
        resumed_from: ResumedFrom | None = None,
    ) -> None:
        """Record the process of a running attempt: pid, its start time, its log file,
        and the session it continues (`resumed_from`), if it resumed one."""
        with self._write() as tx:
            record(tx, StartReport(attempt_id, token, pid, pid_started, log_path, resumed_from))

    def finish(
        self,
        attempt_id: str,
        token: str,
        exit_code: int | None,
        reason: str | None = None,
        now: float | None = None,
        *,
        requeue: bool = False,
        reap_after: float | None = None,
        output: str | None = None,
        usage: Usage | None = None,
        session_id: str | None = None,
        resumable: bool = False,
        denied: tuple[str, ...] = (),
        ended_ago: float | None = None,
    ) -> Task:
        """Commit the outcome of an attempt whose process has exited.

        A pending cancel, terminate or forced restart decides the outcome; otherwise exit
        code 0 without a reason succeeds and anything else fails, and is retried after an
        exponential backoff with jitter while attempts are left.

        Args:
            requeue: the attempt never ran its command (its node died before spawning it):
                put the task back in line without counting the attempt.
            reap_after: finish only if the attempt's lease has lapsed and its node has not
                heartbeated for this many seconds, each by the fencing margin
                (`fencing.margin`; checked inside the transaction), for a node reaping
                another node's attempts.
            output: the end of a failed run's output, which its agent type's back-off
                pattern is matched against (with `reason`).
            usage, session_id: what the run spent and its agent's session id, recorded
                on the attempt.
            resumable: the run was interrupted (its node died, its timeout): the next
                attempt continues its session (`resume`), if it has one.
            denied: the tool uses its agent was refused (one name each): the run is
                flagged (a `denied` event; a success says so in its `status_reason`).
            ended_ago: the process ended this many seconds before the report (found by a
                node restarted after it): the run's end and its run time are that
                earlier instant (never before its start), not the time of the report.

        Raises:
            StaleAttempt: the attempt is not the task's current one, or the token is wrong,
                or (with reap_after) its node is still alive.
        """
        with self._write() as tx:
            now = tx.now() if now is None else now  # under the lock, as in `claim`
            report = Report(
                attempt_id, token, exit_code, reason, requeue, output, usage, session_id,
                resumable, tuple(denied), ended_ago,
            )  # fmt: skip
            return load(tx, end(tx, report, now, reap_after))

    # -- external runners -----------------------------------------------------------------

    def attempt(self, attempt_id: str) -> Attempt:
        """One attempt by its full id (or its dashed UUID form).

        Raises:
            NotFound: no attempt has that id.
        """
        with self._transaction(write=False) as tx:
            attempt_id = _attempt_id(attempt_id)
            row = tx.one("attempt_get", id=attempt_id)
            if row is None:
                raise NotFound(f"no attempt {attempt_id}", attempt_id=attempt_id)
            return attempt_from_row(row)

    def renew_attempt(
        self,
        attempt_id: str,
        token: str,
        lease: float = LEASE_SECONDS,
        now: float | None = None,
    ) -> tuple[Task, float]:
        """Extend the lease of one live attempt (an external runner's heartbeat).

        Returns the task, whose `kill_request` tells the runner whether to stop, and when
        the lease now ends (by the store's clock, which reaping compares it with).

        Raises:
            StaleAttempt: the attempt is not the task's current one, or the token is wrong.
        """
        with self._transaction(write=True, serial=Serial.ROWS) as tx:
            now = tx.now() if now is None else now
            task, attempt = live_attempt(tx, attempt_id, token)
            # Not under the write lock: a reaper or a node may have ended it since the
            # check above (the update then waits for that end and renews nothing).
            if tx.one("attempt_renew_one", id=attempt.id, lease_expires_at=now + lease) is None:
                raise StaleAttempt(f"attempt {attempt.id[:8]} ended; its report was ignored")
            return task, now + lease


def live_attempt(tx: Tx, attempt_id: str, token: str) -> tuple[Task, Attempt]:
    attempt_id = _attempt_id(attempt_id)
    row = tx.one("attempt_get", id=attempt_id)
    if row is None:
        raise NotFound(f"no attempt {attempt_id}")
    attempt = attempt_from_row(row)
    task = load(tx, attempt.task_id)
    if not same_token(attempt.token, token):
        raise StaleAttempt(f"wrong token for attempt {attempt_id[:8]}")
    if attempt.finished_at is not None or task.current_attempt != attempt.id:
        raise StaleAttempt(
            f"attempt {attempt_id[:8]} of task {task.id[:8]} is no longer current; "
            "its report was ignored"
        )
    return task, attempt


def record(tx: Tx, report: StartReport) -> None:
    task, attempt = live_attempt(tx, report.attempt_id, report.token)
    started(
        tx, task.id, attempt.id, report.pid, report.pid_started, report.log_path,
        report.resumed_from,
    )  # fmt: skip


def started(
    tx: Tx,
    task_id: str,
    attempt_id: str,
    pid: int | None,
    pid_started: float | None,
    log_path: str | None,
    resumed_from: ResumedFrom | None = None,
) -> None:
    tx.run("attempt_started", id=attempt_id, pid=pid, pid_started=pid_started, log_path=log_path)
    if resumed_from is None:
        emit(tx, "started", task_id, tx.now(), attempt=attempt_id, pid=pid)
        return
    tx.run(
        "attempt_resumed", id=attempt_id, resumed_task=resumed_from.task_id,
        resumed_attempt=resumed_from.attempt, session_id=resumed_from.session_id,
    )  # fmt: skip
    emit(
        tx, "started", task_id, tx.now(), attempt=attempt_id, pid=pid,
        resumed_from=resumed_from.to_dict(),
    )  # fmt: skip


def end(
    tx: Tx,
    report: Report,
    now: float,
    reap_after: float | None = None,
    runs: list[tuple[str | None, float]] | None = None,
) -> str:
    """`finish` inside the caller's transaction; returns the task's id. A run that ran
    adds its time to the recent run times, at once or, given `runs`, by appending
    (agent type, seconds) there for the caller to record with others."""
    exit_code, reason, requeue = report.exit_code, report.reason, report.requeue
    task, attempt = live_attempt(tx, report.attempt_id, report.token)
    if reap_after is not None:
        _check_reapable(tx, attempt, now, reap_after)
    stop = task.kill_request
    if stop is not None:
        outcome, status = stop.outcome, check_transition(stop.verb, task.id, task.status)
        if stop.kind is StopKind.TERMINATE:
            reason = stop.stop_reason
    elif requeue:
        outcome, status = "interrupted", check_transition("retry", task.id, task.status)
    elif exit_code == 0 and reason is None:
        outcome, status = "succeeded", check_transition("succeed", task.id, task.status)
    else:
        outcome, status = "failed", check_transition("fail", task.id, task.status)
        reason = reason or f"exit code {exit_code}"
    refused = backoff.refused(
        tx, task, attempt, outcome, report.exit_code, (report.output, report.reason), now
    )
    if refused is not None:
        # What matched is the reason, also of a task failing with its requeues used up.
        reason, requeued = refused
        outcome = "throttled" if requeued else outcome
    usage = results.own_usage(tx, attempt, report.usage)
    # When the process ended: now, or earlier when a restarted node found it ended.
    ended = now if report.ended_ago is None else max(attempt.started_at, now - report.ended_ago)
    tx.run(
        "attempt_end",
        id=attempt.id,
        now=ended,
        exit_code=exit_code,
        outcome=outcome,
        reason=reason,
        cost_usd=None if usage is None else usage.cost_usd,
        input_tokens=None if usage is None else usage.input_tokens,
        output_tokens=None if usage is None else usage.output_tokens,
        session_totals=results.totals_column(usage),
        session_id=report.session_id,
        denied_tools=results.denied_column(report.denied),
    )
    results.flag_denied(tx, task, attempt, report.denied, now)
    if report.resumable:
        tx.run("attempt_resumable", id=attempt.id)
    ran = outcome in ("succeeded", "failed") and _ran(task, attempt.pid, exit_code)
    used = task.attempt_count - task.attempt_base
    if outcome == "succeeded":
        backoff.succeeded(tx, task.agent, attempt.started_at, now)
    if outcome in ("interrupted", "throttled"):
        if outcome == "throttled":
            check_transition("retry", task.id, task.status)
            reason = f"provider back-off of {task.agent}: {reason}"
        tx.run("task_requeue_uncounted", id=task.id, status_reason=reason)
        change(tx, task, "requeued", Status.QUEUED, now, attempt=attempt.id, reason=reason)
    elif status is Status.QUEUED:
        deps.reset_task(tx, task, now)
    elif outcome == "failed" and used < task.max_attempts:
        _retry(tx, task, attempt, used, exit_code, reason, now)
    else:
        flagged = refused_tools(report.denied) if outcome == "succeeded" else None
        deps.end_task(
            tx, task, status, outcome, now, status_reason=flagged, ended=ended,
            exit_code=exit_code, failure_reason=reason,
            event={"attempt": attempt.id, "exit_code": exit_code, "reason": reason},
        )  # fmt: skip
    if ran:
        took = (task.agent, ended - attempt.started_at)
        if runs is None:
            windows.write(tx, windows.measured([took], None), now)
        else:
            runs.append(took)
    after_end(tx, task.id, now)
    return task.id


def after_end(tx: Tx, task_id: str, now: float) -> None:
    """In the transaction that ends a run: if nothing runs or waits in line to start
    any more, the queue has drained (a `drained` event). (The statement that ends or
    requeues the task has cleared its stall mark.)"""

    def drained() -> None:
        # Once per transaction, at its end: a claim that ends several runs and starts
        # others reads it once, and after its starts; one that started a run need not
        # ask (a round trip on PostgreSQL): that run is running at the commit.
        if any(event["kind"] == "claimed" for event in tx.events):
            return
        busy = tx.one("tasks_active_any")
        if busy is not None and not busy["busy"]:
            emit(tx, "drained", None, now, last_task=task_id)

    tx.once_before_commit("drained", drained)


def _retry(
    tx: Tx,
    task: Task,
    attempt: Attempt,
    used: int,
    exit_code: int | None,
    reason: str | None,
    now: float,
) -> None:
    check_transition("retry", task.id, task.status)
    cap = float(read_settings(tx)["retry_backoff_max"])
    delay = min(task.backoff * 2 ** (used - 1) * random.uniform(0.5, 1.5), cap)
    tx.run(
        "task_retry",
        id=task.id,
        not_before=now + delay,
        exit_code=exit_code,
        failure_reason=reason,
        status_reason=f"attempt {used + 1} of {task.max_attempts} after: {reason}",
    )
    change(
        tx,
        task,
        "retry",
        Status.QUEUED,
        now,
        attempt=attempt.id,
        exit_code=exit_code,
        reason=reason,
        delay=round(delay, 3),
    )


def expire(tx: Tx, task: Task, now: float) -> None:
    check_transition("expire", task.id, task.status)
    reason = f"not started within its queue TTL of {task.queue_ttl:g}s"
    deps.end_task(
        tx, task, Status.EXPIRED, "expired", now,
        status_reason=reason, failure_reason=reason, event={"reason": reason},
    )  # fmt: skip


def _check_reapable(tx: Tx, attempt: Attempt, now: float, grace: float) -> None:
    # The lease read again with the attempt's row locked: a heartbeat that has renewed it
    # meanwhile is seen (its lock waited for), and one that comes later passes it over.
    row = tx.one("attempt_lease_locked", id=attempt.id)
    lease = None if row is None else row["lease_expires_at"]
    node = tx.one("node_get", id=attempt.node_id) if attempt.node_id else None
    beat = None if node is None else float(node["heartbeat_at"])
    # Only once the lease lapsed by the fencing margin: the run's keeper has killed it by
    # the time its lease lapses (`slotline.fencing`), so its copy here never overlaps it.
    slack = fencing.margin(grace)
    if (lease is not None and lease >= now - slack) or (
        beat is not None and beat >= now - grace - slack
    ):
        raise StaleAttempt(
            f"attempt {attempt.id[:8]} of node {attempt.node_id} is alive (lease or "
            "heartbeat is recent); not reaped"
        )


def _attempt_id(text: str) -> str:
    """An attempt id (or its dashed UUID form) as stored; one that cannot be an id at
    all is unknown, as attempt ids are never abbreviated."""
    try:
        return parse_id(text)
    except InvalidInput:
        raise NotFound(f"no attempt {text[:80]}", attempt_id=text[:80]) from None


def _ran(task: Task, pid: int | None, exit_code: int | None) -> bool:
    """Whether an attempt really ran, so its time says how long runs take: not a command
    that never got a process (a missing workspace) or whose program could not be executed
    (the keeper's exit code 127)."""
    if task.kind is Kind.CALLABLE:
        return True
    return pid is not None and exit_code != EXEC_FAILED
