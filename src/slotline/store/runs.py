"""The run lifecycle: claim, record a start, finish, retry, expire, and external runners' verbs."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field, replace

from slotline.errors import NotFound, StaleAttempt
from slotline.models import Attempt, Status, Task, check_transition, utcnow
from slotline.scheduler import policy
from slotline.store import deps, ops
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, task_from_row
from slotline.store.steering import SteeringVerbs

LEASE_SECONDS = 30.0
COMMAND_KINDS = frozenset({"command", "callable"})


@dataclass(frozen=True, slots=True)
class Claim:
    """A task the calling node now runs, and the attempt it runs it as."""

    task: Task
    attempt: Attempt


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claims: list[Claim] = field(default_factory=list)
    # When to look at the queue again even if nothing changes (backoff ends, TTL passes).
    next_wake: float | None = None


class RunVerbs(SteeringVerbs):
    """How an attempt is claimed, reported, finished, retried or expired."""

    # -- claim, report, finish ------------------------------------------------------------

    def claim(
        self,
        node_id: str,
        now: float | None = None,
        kinds: frozenset[str] = COMMAND_KINDS,
        lease: float = LEASE_SECONDS,
        hold: bool = False,
        limit: int | None = None,
    ) -> ClaimResult:
        """Expire overdue tasks and start every task that fits, in one transaction.

        The limit check and the queued→running change happen under the store's write
        lock, so concurrent nodes can never over-fill a limit. `hold` starts only bumped
        tasks (the resource guard is holding); `limit` lowers max_concurrent for this
        claim (the guard's adaptive limit).
        """
        with self._write() as tx:
            # The clock is read under the write lock, so that recorded starts and ends
            # follow commit order: a slot is never seen taken before it was freed.
            now = utcnow() if now is None else now
            expired = tx.rows("tasks_ttl_due", now=now)
            for row in expired:
                self._expire(tx, task_from_row(row), now)
            settings = ops.read_settings(tx)
            limits = settings.limits
            if limit is not None and limit < limits.max_concurrent:
                limits = replace(limits, max_concurrent=limit)
            snapshot = policy.Snapshot(
                running=[task_from_row(r) for r in tx.rows("tasks_running")],
                queued=(task_from_row(r) for r in tx.iter_rows("tasks_queued_in_order")),
                start_now=[task_from_row(r) for r in tx.rows("tasks_start_now")],
                limits=limits,
                now=now,
                paused=bool(settings["paused"]) or hold,
                aging_interval=settings["aging_interval"],
            )
            decided = policy.plan(snapshot, runnable=lambda t: t.kind.value in kinds)
            claims = [self._start(tx, s, node_id, now, lease) for s in decided.start]
            tx.notify = bool(claims or expired)
            deadline = (tx.one("next_ttl_deadline") or {}).get("at")
            wakes = [w for w in (decided.next_wake, deadline) if w is not None]
            return ClaimResult(claims, min(wakes) if wakes else None)

    def _start(self, tx: Tx, start: policy.Start, node_id: str, now: float, lease: float) -> Claim:
        task = ops.load(tx, start.task_id)
        check_transition("claim", task.id, task.status)
        attempt_id = secrets.token_hex(16)
        number = task.attempt_count + 1
        tx.run(
            "attempt_insert",
            id=attempt_id,
            task_id=task.id,
            number=number,
            token=secrets.token_urlsafe(24),
            node_id=node_id,
            now=now,
            over_limit=start.over_limit,
            lease_expires_at=now + lease,
        )
        tx.run("task_claim", id=task.id, now=now, attempt_id=attempt_id)
        ops.change(
            tx,
            task,
            "claimed",
            Status.RUNNING,
            now,
            attempt=attempt_id,
            number=number,
            node=node_id,
            over_limit=start.over_limit,
        )
        row = tx.one("attempt_get", id=attempt_id)
        assert row is not None
        return Claim(ops.load(tx, task.id), attempt_from_row(row))

    def _live_attempt(self, tx: Tx, attempt_id: str, token: str) -> tuple[Task, Attempt]:
        row = tx.one("attempt_get", id=attempt_id)
        if row is None:
            raise NotFound(f"no attempt {attempt_id}")
        attempt = attempt_from_row(row)
        task = ops.load(tx, attempt.task_id)
        if not secrets.compare_digest(attempt.token, token):
            raise StaleAttempt(f"wrong token for attempt {attempt_id[:8]}")
        if attempt.finished_at is not None or task.current_attempt != attempt.id:
            raise StaleAttempt(
                f"attempt {attempt_id[:8]} of task {task.id[:8]} is no longer current; "
                "its report was ignored"
            )
        return task, attempt

    def record_start(
        self,
        attempt_id: str,
        token: str,
        pid: int | None,
        pid_started: float | None = None,
        log_path: str | None = None,
    ) -> None:
        """Record the process of a running attempt: pid, its start time, its log file."""
        with self._write() as tx:
            task, attempt = self._live_attempt(tx, attempt_id, token)
            tx.run(
                "attempt_started",
                id=attempt.id,
                pid=pid,
                pid_started=pid_started,
                log_path=log_path,
            )
            ops.emit(tx, "started", task.id, utcnow(), attempt=attempt.id, pid=pid)

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
    ) -> Task:
        """Commit the outcome of an attempt whose process has exited.

        A pending cancel, terminate or forced restart decides the outcome; otherwise exit
        code 0 without a reason succeeds and anything else fails, and is retried after an
        exponential backoff with jitter while attempts are left.

        Args:
            requeue: the attempt never ran its command (its node died before spawning it):
                put the task back in line without counting the attempt.
            reap_after: finish only if the attempt's lease has lapsed and its node has not
                heartbeated for this many seconds (checked inside the transaction), for a
                node reaping another node's attempts.

        Raises:
            StaleAttempt: the attempt is not the task's current one, or the token is wrong,
                or (with reap_after) its node is still alive.
        """
        with self._write() as tx:
            now = utcnow() if now is None else now  # under the lock, as in `claim`
            task, attempt = self._live_attempt(tx, attempt_id, token)
            if reap_after is not None:
                self._check_reapable(tx, attempt, now, reap_after)
            request = task.kill_request or ""
            if request == "cancel":
                outcome, status = "cancelled", Status.CANCELLED
            elif request.startswith("terminate:"):
                outcome, status = "terminated", Status.FAILED
                reason = "terminated: " + request.removeprefix("terminate:")
            elif task.restart_requested:
                outcome, status = "restarted", Status.QUEUED
            elif requeue:
                outcome, status = "interrupted", Status.QUEUED
            elif exit_code == 0 and reason is None:
                outcome, status = "succeeded", Status.SUCCEEDED
            else:
                outcome, status = "failed", Status.FAILED
                reason = reason or f"exit code {exit_code}"
            tx.run(
                "attempt_end",
                id=attempt.id,
                now=now,
                exit_code=exit_code,
                outcome=outcome,
                reason=reason,
            )
            used = task.attempt_count - task.attempt_base
            if outcome == "interrupted":
                check_transition("retry", task.id, task.status)
                tx.run("task_requeue_uncounted", id=task.id, status_reason=reason)
                ops.change(
                    tx, task, "requeued", Status.QUEUED, now, attempt=attempt.id, reason=reason
                )
            elif status is Status.QUEUED:
                self._reset(tx, task, now)
            elif outcome == "failed" and used < task.max_attempts:
                self._retry(tx, task, attempt, used, exit_code, reason, now)
            else:
                check_transition(
                    "succeed" if outcome == "succeeded" else "fail", task.id, task.status
                )
                tx.run(
                    "task_end",
                    id=task.id,
                    status=status.value,
                    status_reason=None,
                    now=now,
                    exit_code=exit_code,
                    failure_reason=reason,
                )
                ops.change(
                    tx,
                    task,
                    outcome,
                    status,
                    now,
                    attempt=attempt.id,
                    exit_code=exit_code,
                    reason=reason,
                )
                deps.propagate_end(tx, task.id, status, now)
            return ops.load(tx, task.id)

    def _retry(
        self,
        tx: Tx,
        task: Task,
        attempt: Attempt,
        used: int,
        exit_code: int | None,
        reason: str | None,
        now: float,
    ) -> None:
        check_transition("retry", task.id, task.status)
        cap = float(ops.read_settings(tx)["retry_backoff_max"])
        delay = min(task.backoff * 2 ** (used - 1) * random.uniform(0.5, 1.5), cap)
        tx.run(
            "task_retry",
            id=task.id,
            not_before=now + delay,
            exit_code=exit_code,
            failure_reason=reason,
            status_reason=f"attempt {used + 1} of {task.max_attempts} after: {reason}",
        )
        ops.change(
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

    def _expire(self, tx: Tx, task: Task, now: float) -> None:
        check_transition("expire", task.id, task.status)
        reason = f"not started within its queue TTL of {task.queue_ttl:g}s"
        tx.run(
            "task_end",
            id=task.id,
            status=Status.EXPIRED.value,
            status_reason=reason,
            now=now,
            exit_code=None,
            failure_reason=reason,
        )
        ops.change(tx, task, "expired", Status.EXPIRED, now, reason=reason)
        deps.propagate_end(tx, task.id, Status.EXPIRED, now)

    def _check_reapable(self, tx: Tx, attempt: Attempt, now: float, grace: float) -> None:
        lease = attempt.lease_expires_at
        node = tx.one("node_get", id=attempt.node_id) if attempt.node_id else None
        beat = None if node is None else float(node["heartbeat_at"])
        if (lease is not None and lease >= now) or (beat is not None and beat >= now - grace):
            raise StaleAttempt(
                f"attempt {attempt.id[:8]} of node {attempt.node_id} is alive (lease or "
                "heartbeat is recent); not reaped"
            )

    # -- external runners -----------------------------------------------------------------

    def attempt(self, attempt_id: str) -> Attempt:
        """One attempt by its full id.

        Raises:
            NotFound: no attempt has that id.
        """
        with self._transaction(write=False) as tx:
            row = tx.one("attempt_get", id=attempt_id)
            if row is None:
                raise NotFound(f"no attempt {attempt_id}", attempt_id=attempt_id)
            return attempt_from_row(row)

    def renew_attempt(
        self, attempt_id: str, token: str, lease: float = LEASE_SECONDS, now: float | None = None
    ) -> Task:
        """Extend the lease of one live attempt (an external runner's heartbeat).

        Returns the task, whose `kill_request` tells the runner whether to stop.

        Raises:
            StaleAttempt: the attempt is not the task's current one, or the token is wrong.
        """
        with self._transaction(write=True) as tx:
            now = utcnow() if now is None else now
            task, attempt = self._live_attempt(tx, attempt_id, token)
            tx.run("attempt_renew_one", id=attempt.id, lease_expires_at=now + lease)
            return task
