"""The run lifecycle: claim, record a start, finish, retry, expire, and external runners' verbs."""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from slotline.bounds import parse_id
from slotline.errors import InvalidInput, NotFound, SlotlineError, StaleAttempt, StoreError
from slotline.models import Attempt, KillRequest, Kind, Status, Task, log_file
from slotline.scheduler import policy
from slotline.store import deps, estimates, ops
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, task_from_row
from slotline.store.steering import SteeringVerbs
from slotline.transitions import StopKind, StopRequest, check_transition

COMMAND_KINDS = frozenset({"command", "callable"})
# The keeper's exit code when the program cannot be executed (as a shell's).
EXEC_FAILED = 127


@dataclass(frozen=True, slots=True)
class Claim:
    """A task the calling node now runs, and the attempt it runs it as."""

    task: Task
    attempt: Attempt


@dataclass(frozen=True, slots=True)
class Report:
    """The outcome of an attempt whose process has exited, as its node reports it
    (the arguments of `finish`)."""

    attempt_id: str
    token: str
    exit_code: int | None
    reason: str | None = None
    requeue: bool = False


@dataclass(frozen=True, slots=True)
class StartReport:
    """A command's process once spawned, as its node reports it (the arguments of
    `record_start`)."""

    attempt_id: str
    token: str
    pid: int | None
    pid_started: float | None
    log_path: str | None


@dataclass(frozen=True, slots=True)
class ClaimResult:
    claims: list[Claim] = field(default_factory=list)
    # When to look at the queue again even if nothing changes (backoff ends, TTL passes).
    next_wake: float | None = None
    # The store's clock at the claim: `next_wake` is on that clock, not the node's.
    now: float | None = None
    # For each report handed to the claim, in order: None once committed, or why it was
    # refused (as `finish` would have raised it).
    finished: list[SlotlineError | None] = field(default_factory=list)
    # The same for each start report handed to the claim.
    recorded: list[SlotlineError | None] = field(default_factory=list)
    # The claiming node's running attempts that someone asked to stop.
    kills: list[KillRequest] = field(default_factory=list)


class RunVerbs(SteeringVerbs):
    """How an attempt is claimed, reported, finished, retried or expired."""

    # -- claim, report, finish ------------------------------------------------------------

    def claim(
        self,
        node_id: str,
        now: float | None = None,
        kinds: frozenset[str] = COMMAND_KINDS,
        lease: float = ops.LEASE_SECONDS,
        hold: bool = False,
        limit: int | None = None,
        slots: int | None = None,
        *,
        started: Sequence[StartReport] = (),
        finished: Sequence[Report] = (),
        log_dir: Path | None = None,
        watcher: str | None = None,
        functions: frozenset[str] | None = None,
    ) -> ClaimResult:
        """Commit the outcomes a node reports, expire overdue tasks and start every task
        that fits, in one transaction (one commit and one wake-up for a whole turn of
        the node's loop).

        The limit check and the queued→running change happen under the store's write
        lock, so concurrent nodes can never over-fill a limit. `hold` starts only bumped
        tasks (the resource guard is holding); `limit` lowers max_concurrent for this
        claim (the guard's adaptive limit); `slots` caps the runs of `node_id` (this
        node's capacity, beside the global and per-key limits; "start now" included).

        Args:
            started: starts of commands to record first, each as `record_start` would
                and each on its own, like `finished`.
            finished: outcomes to commit first, each as `finish` would and each on its
                own: a refused report changes nothing and is returned as its error, the
                others are committed. The slots they free are filled by this claim.
            log_dir: the node's log folder: a callable task starts with its claim, so its
                start (and log file) is recorded here, not by a later `record_start`.
            watcher: the id of the claiming node's own watcher, which the commit does not
                wake: the node knows what its claim changed (the result says when to
                look again), and waking it would only cost it an empty claim.
            functions: the function names the node runs: it claims no other callable task
                (None: any callable task, if `kinds` has callables).
        """
        with self._write() as tx:
            # The clock is read under the write lock, so that recorded starts and ends
            # follow commit order: a slot is never seen taken before it was freed.
            now = tx.now() if now is None else now
            recorded = [self._part(tx, self._record, report) for report in started]
            outcomes = [self._part(tx, self._end, report, now) for report in finished]
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
            decided = policy.plan(snapshot, runnable=lambda t: _runnable(t, kinds, functions))
            starts = decided.start
            if slots is not None:
                # The first starts of the plan are what a plan with fewer slots starts.
                free = slots - ops.count(tx, "count_running_on_node", node_id=node_id)
                starts = starts[: max(0, free)]
            claims = [self._start(tx, s, node_id, now, lease, log_dir) for s in starts]
            if claims and len(snapshot.running) + len(claims) >= limits.max_concurrent:
                # The line is full again: these claims took slots a finish freed; how
                # long after it is the dispatch gap ETAs add to every run.
                estimates.record_gap(tx, now)
            tx.notify = bool(claims or expired or outcomes.count(None) or recorded.count(None))
            tx.quiet_for = watcher
            deadline = (tx.one("next_ttl_deadline") or {}).get("at")
            wakes = [w for w in (decided.next_wake, deadline) if w is not None]
            kills = _kill_requests(tx, node_id)
            wake = min(wakes) if wakes else None
            return ClaimResult(claims, wake, now, outcomes, recorded, kills)

    def _part(self, tx: Tx, step: Callable[..., object], *args: Any) -> SlotlineError | None:
        """Apply one report inside a claim; a refusal undoes only its own part, and is
        returned."""
        try:
            with tx.part():
                step(tx, *args)
        except StoreError:
            raise
        except SlotlineError as exc:
            return exc
        return None

    def _start(
        self,
        tx: Tx,
        start: policy.Start[Task],
        node_id: str,
        now: float,
        lease: float,
        log_dir: Path | None,
    ) -> Claim:
        task = start.task  # as read by this transaction
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
            over_limit=start.over_limit,
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
            over_limit=start.over_limit,
            lease_expires_at=attempt.lease_expires_at,
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
        if log_path is not None:
            self._started(tx, task.id, attempt_id, None, None, log_path)
        # The task as `task_claim` left it (a contract test compares it with a fresh read).
        claimed = replace(
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

    def kill_requests(self, node_id: str) -> list[KillRequest]:
        """Running attempts of `node_id` someone asked to stop (cancel, terminate, restart)."""
        with self._transaction(write=False) as tx:
            return _kill_requests(tx, node_id)

    def _live_attempt(self, tx: Tx, attempt_id: str, token: str) -> tuple[Task, Attempt]:
        attempt_id = _attempt_id(attempt_id)
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
            self._record(tx, StartReport(attempt_id, token, pid, pid_started, log_path))

    def _record(self, tx: Tx, report: StartReport) -> None:
        task, attempt = self._live_attempt(tx, report.attempt_id, report.token)
        self._started(tx, task.id, attempt.id, report.pid, report.pid_started, report.log_path)

    def _started(
        self,
        tx: Tx,
        task_id: str,
        attempt_id: str,
        pid: int | None,
        pid_started: float | None,
        log_path: str | None,
    ) -> None:
        tx.run(
            "attempt_started", id=attempt_id, pid=pid, pid_started=pid_started, log_path=log_path
        )
        ops.emit(tx, "started", task_id, tx.now(), attempt=attempt_id, pid=pid)

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
            now = tx.now() if now is None else now  # under the lock, as in `claim`
            report = Report(attempt_id, token, exit_code, reason, requeue)
            return ops.load(tx, self._end(tx, report, now, reap_after))

    def _end(self, tx: Tx, report: Report, now: float, reap_after: float | None = None) -> str:
        """`finish` inside the caller's transaction; returns the task's id."""
        exit_code, reason, requeue = report.exit_code, report.reason, report.requeue
        task, attempt = self._live_attempt(tx, report.attempt_id, report.token)
        if reap_after is not None:
            self._check_reapable(tx, attempt, now, reap_after)
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
        tx.run(
            "attempt_end",
            id=attempt.id,
            now=now,
            exit_code=exit_code,
            outcome=outcome,
            reason=reason,
        )
        if outcome in ("succeeded", "failed") and _ran(task, attempt.pid, exit_code):
            estimates.record_run(tx, task.agent, now - attempt.started_at, now)
        used = task.attempt_count - task.attempt_base
        if outcome == "interrupted":
            tx.run("task_requeue_uncounted", id=task.id, status_reason=reason)
            ops.change(tx, task, "requeued", Status.QUEUED, now, attempt=attempt.id, reason=reason)
        elif status is Status.QUEUED:
            self._reset(tx, task, now)
        elif outcome == "failed" and used < task.max_attempts:
            self._retry(tx, task, attempt, used, exit_code, reason, now)
        else:
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
        return task.id

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
        lease: float = ops.LEASE_SECONDS,
        now: float | None = None,
    ) -> Task:
        """Extend the lease of one live attempt (an external runner's heartbeat).

        Returns the task, whose `kill_request` tells the runner whether to stop.

        Raises:
            StaleAttempt: the attempt is not the task's current one, or the token is wrong.
        """
        with self._transaction(write=True) as tx:
            now = tx.now() if now is None else now
            task, attempt = self._live_attempt(tx, attempt_id, token)
            tx.run("attempt_renew_one", id=attempt.id, lease_expires_at=now + lease)
            return task


def _runnable(task: Task, kinds: frozenset[str], functions: frozenset[str] | None) -> bool:
    if task.kind is Kind.CALLABLE and functions is not None:
        return task.callable in functions
    return task.kind.value in kinds


def _kill_requests(tx: Tx, node_id: str) -> list[KillRequest]:
    return [
        KillRequest(r["task_id"], r["attempt_id"], r["pid"], StopRequest.read(r["kill_request"]))
        for r in tx.rows("tasks_kill_requested", node_id=node_id)
    ]


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
