"""The store: domain verbs, each one transaction that checks the transition and logs events.

Backends (SQLite, PostgreSQL) supply a connection, a serialized write transaction and
change notification; every verb, transition check and event is written here, once.
The steering verbs (cancel, move, restart…) live in `steering.py`.
"""

from __future__ import annotations

import os
import random
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from slotline.errors import BoundExceeded, NotFound, StaleAttempt
from slotline.models import Attempt, Event, Status, Task, check_transition, utcnow
from slotline.scheduler import policy
from slotline.spec import TaskSpec, parse_spec
from slotline.store import deps, ops
from slotline.store.core import StoreCore
from slotline.store.ops import Settings
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, dumps, event_from_row, task_from_row
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


@dataclass(frozen=True, slots=True)
class KillRequest:
    """A running attempt on this node that someone asked to stop."""

    task_id: str
    attempt_id: str
    pid: int | None
    kind: str


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """Capacity and the line, as `slotline status` shows it."""

    active: int
    max_concurrent: int
    paused: bool
    over_limit: bool
    queued: list[Task]
    running: list[Task]
    # Why the resource guard holds new starts (CPU or memory past a threshold), if it does.
    admission: str | None = None

    @property
    def slots_available(self) -> int:
        return max(0, self.max_concurrent - self.active)

    @property
    def at_capacity(self) -> bool:
        return self.active >= self.max_concurrent

    def to_dict(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "max_concurrent": self.max_concurrent,
            "slots_available": self.slots_available,
            "at_capacity": self.at_capacity,
            "paused": self.paused,
            "admission_hold": self.admission,
            "over_limit": self.over_limit,
            "next_up": self.queued[0].id if self.queued else None,
            "running": [t.to_dict() for t in self.running],
            "queued": [t.to_dict() for t in self.queued],
        }


class Store(SteeringVerbs, StoreCore):
    """Every change to slotline's state goes through one of these verbs."""

    # -- reads --------------------------------------------------------------------------

    def get(self, ref: str) -> Task:
        """One task with its attempts and, if queued, its position.

        Raises:
            NotFound: no task has that id or prefix.
            AmbiguousId: the prefix matches several tasks.
        """
        with self._transaction(write=False) as tx:
            task = ops.resolve(tx, ref)
            position = None
            if task.status is Status.QUEUED:
                position = self._positions(tx).get(task.id)
            return ops.with_attempts(tx, task, position)

    def _positions(self, tx: Tx) -> dict[str, int]:
        aging = ops.read_settings(tx)["aging_interval"]
        return {t.id: i for i, t in enumerate(ops.ordered_queue(tx, utcnow(), aging), 1)}

    def list_tasks(self, status: Status | None = None, limit: int = 10_000) -> list[Task]:
        """Tasks in submission order, optionally of one status; queued ones carry positions."""
        with self._transaction(write=False) as tx:
            if status is None:
                rows = tx.rows("tasks_all", limit=limit)
            else:
                rows = tx.rows("tasks_by_status", status=Status(status).value, limit=limit)
            positions = self._positions(tx)
            return [ops.with_attempts(tx, task_from_row(r), positions.get(r["id"])) for r in rows]

    def status(self, now: float | None = None) -> QueueStatus:
        """Capacity (active of max, slots free) and the queued tasks in order."""
        now = utcnow() if now is None else now
        with self._transaction(write=False) as tx:
            settings = ops.read_settings(tx)
            limits = settings.limits
            running = [ops.with_attempts(tx, task_from_row(r)) for r in tx.rows("tasks_running")]
            queue = ops.ordered_queue(tx, now, settings["aging_interval"])
            return QueueStatus(
                active=sum(1 for t in running if limits.in_pool(t)),
                max_concurrent=limits.max_concurrent,
                paused=bool(settings["paused"]),
                admission=(settings["pressure"] or {}).get("reason"),
                over_limit=any(
                    a.over_limit and a.finished_at is None for t in running for a in t.attempts
                ),
                queued=[replace(t, position=i) for i, t in enumerate(queue, 1)],
                running=running,
            )

    def events(self, since: int = 0, limit: int = 1000) -> list[Event]:
        """Events with `seq` greater than `since`, oldest first."""
        with self._transaction(write=False) as tx:
            return [event_from_row(r) for r in tx.rows("events_since", since=since, limit=limit)]

    def last_seq(self) -> int:
        with self._transaction(write=False) as tx:
            return int((tx.one("events_last_seq") or {"seq": 0})["seq"])

    def attempts(self) -> list[Attempt]:
        """Every attempt ever made, by start time (for audits and stats)."""
        with self._transaction(write=False) as tx:
            return [attempt_from_row(r) for r in tx.rows("attempts_all")]

    def settings(self) -> Settings:
        with self._transaction(write=False) as tx:
            return ops.read_settings(tx)

    def counts(self) -> dict[str, int]:
        """Number of tasks in each status."""
        with self._transaction(write=False) as tx:
            return {r["status"]: int(r["n"]) for r in tx.rows("count_by_status")}

    # -- submit -------------------------------------------------------------------------

    def submit(self, spec: TaskSpec | dict[str, Any], now: float | None = None) -> Task:
        """Create a task: queued, waiting on dependencies, held, or blocked by a bad one.

        Raises:
            InvalidInput: the spec is malformed.
            UnknownDependency: a `depends_on` id does not exist.
            BoundExceeded: queue size, depth or children bound reached; nothing created.
        """
        return self.submit_many([spec], now)[0]

    def submit_many(
        self, specs: Iterable[TaskSpec | dict[str, Any]], now: float | None = None
    ) -> list[Task]:
        """Submit several tasks in one transaction: all are created or none."""
        parsed = [parse_spec(s) for s in specs]
        now = utcnow() if now is None else now
        with self._write() as tx:
            settings = ops.read_settings(tx)
            pending = ops.count(tx, "count_pending")
            bound = settings["max_queue_size"]
            if pending + len(parsed) > bound:
                raise BoundExceeded(
                    f"queue is full: {pending} tasks wait, max_queue_size is {bound}",
                    limit="max_queue_size",
                    max=bound,
                )
            created = [self._insert(tx, spec, settings, now) for spec in parsed]
        return [replace(t, position=None) for t in created]

    def _parent_depth(self, tx: Tx, parent_ref: str, settings: Settings) -> tuple[str, int]:
        parent = ops.resolve(tx, parent_ref)
        depth = parent.depth + 1
        if depth > settings["max_depth"]:
            raise BoundExceeded(
                f"task {parent.id[:8]} is at depth {parent.depth}; max_depth is "
                f"{settings['max_depth']}",
                limit="max_depth",
                max=settings["max_depth"],
            )
        children = ops.count(tx, "count_active_children", parent_id=parent.id)
        if children >= settings["max_children"]:
            raise BoundExceeded(
                f"task {parent.id[:8]} already has {children} active children; "
                f"max_children is {settings['max_children']}",
                limit="max_children",
                max=settings["max_children"],
            )
        return parent.id, depth

    def _insert(self, tx: Tx, spec: TaskSpec, settings: Settings, now: float) -> Task:
        parent_id, depth = None, 0
        if spec.parent_id is not None:
            parent_id, depth = self._parent_depth(tx, spec.parent_id, settings)
        needs = deps.resolve_dependencies(tx, spec.depends_on)
        status, reason = deps.initial_status(needs, spec.hold)
        task_id = secrets.token_hex(16)
        tx.run(
            "task_insert",
            id=task_id,
            kind=spec.resolved_kind.value,
            command=dumps(spec.command),
            callable=spec.callable,
            args=dumps(spec.args),
            title=spec.display_title(),
            agent=spec.agent,
            workspace=spec.workspace,
            owner=spec.user,
            labels=dumps(spec.labels),
            env=dumps(spec.env),
            priority=int(spec.priority),
            rank=ops.next_rank(tx),
            status=status.value,
            status_reason=reason,
            depends_on=dumps([d.id for d in needs]),
            parent_id=parent_id,
            depth=depth,
            max_attempts=spec.max_attempts,
            backoff=spec.backoff,
            timeout=spec.timeout,
            queue_ttl=spec.queue_ttl,
            created_at=now,
            queued_at=now if status in (Status.QUEUED, Status.HELD) else None,
            memory_mb=spec.memory_mb,
            expected_duration=spec.expected_duration,
        )
        for dep in needs:
            tx.run("dep_insert", task_id=task_id, dep_id=dep.id)
        ops.emit(
            tx,
            "submitted",
            task_id,
            now,
            to=status.value,
            title=spec.display_title(),
            priority=spec.priority.label,
            parent_id=parent_id,
            reason=reason,
        )
        return ops.load(tx, task_id)

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

    # -- node bookkeeping ---------------------------------------------------------------

    def kill_requests(self, node_id: str) -> list[KillRequest]:
        """Running attempts of `node_id` someone asked to stop (cancel, terminate, restart)."""
        with self._transaction(write=False) as tx:
            return [
                KillRequest(r["task_id"], r["attempt_id"], r["pid"], r["kill_request"])
                for r in tx.rows("tasks_kill_requested", node_id=node_id)
            ]

    def heartbeat(
        self, node_id: str, now: float | None = None, lease: float = LEASE_SECONDS
    ) -> None:
        """Renew the node's liveness and the leases of its running attempts."""
        now = utcnow() if now is None else now
        with self._transaction(write=True) as tx:
            if tx.run("node_heartbeat", id=node_id, now=now) == 0:
                tx.run(
                    "node_insert", id=node_id, host=socket.gethostname(), pid=os.getpid(), now=now
                )
            tx.run("attempt_renew", node_id=node_id, lease_expires_at=now + lease)

    def record_usage(self, usage: dict[str, tuple[float, int]]) -> None:
        """Latest CPU% and RSS of running attempts' process trees ({attempt id: (cpu, rss)});
        the peaks are kept. Wakes no one: readers refresh on their own."""
        with self._transaction(write=True) as tx:
            for attempt_id, (cpu, rss) in usage.items():
                tx.run("attempt_usage", id=attempt_id, cpu_percent=float(cpu), rss_bytes=int(rss))

    def note_reconciled(self, task_id: str, attempt_id: str, action: str, **detail: Any) -> None:
        """Log what a starting node did with an attempt it found running: `adopted` (the
        process lives on), `collected` (its exit file told the outcome), `interrupted`."""
        with self._write() as tx:
            ops.emit(
                tx, "reconciled", task_id, utcnow(), attempt=attempt_id, action=action, **detail
            )

    def set_pressure(self, node_id: str, reason: str | None, hold: bool) -> None:
        """Record (or clear) the resource guard's verdict so `status` can say why nothing
        starts; emits an `admission` event only when it changes."""
        now = utcnow()
        with self._write() as tx:
            current = ops.read_settings(tx)["pressure"] or {}
            if current.get("reason") == reason and current.get("hold", False) == hold:
                tx.notify = False
                return
            value = (
                None
                if reason is None
                else {"node": node_id, "reason": reason, "hold": hold, "since": now}
            )
            ops.write_setting(tx, "pressure", value)
            ops.emit(tx, "admission", None, now, node=node_id, reason=reason, hold=hold)

    def _check_reapable(self, tx: Tx, attempt: Attempt, now: float, grace: float) -> None:
        lease = attempt.lease_expires_at
        node = tx.one("node_get", id=attempt.node_id) if attempt.node_id else None
        beat = None if node is None else float(node["heartbeat_at"])
        if (lease is not None and lease >= now) or (beat is not None and beat >= now - grace):
            raise StaleAttempt(
                f"attempt {attempt.id[:8]} of node {attempt.node_id} is alive (lease or "
                "heartbeat is recent); not reaped"
            )

    def node(self, node_id: str) -> dict[str, Any] | None:
        """The node's row (host, pid, started_at, heartbeat_at), if it is registered."""
        with self._transaction(write=False) as tx:
            return tx.one("node_get", id=node_id)

    def register_node(self, node_id: str, now: float | None = None) -> None:
        now = utcnow() if now is None else now
        with self._write() as tx:
            tx.run("node_delete", id=node_id)
            tx.run("node_insert", id=node_id, host=socket.gethostname(), pid=os.getpid(), now=now)
            ops.emit(tx, "node_started", None, now, node=node_id)

    def unregister_node(self, node_id: str) -> None:
        with self._write() as tx:
            tx.run("node_delete", id=node_id)
            ops.emit(tx, "node_stopped", None, utcnow(), node=node_id)

    def live_attempts(self, node_id: str | None = None) -> list[Attempt]:
        """Unfinished attempts (of one node, or of all whose lease lapsed if node_id is None)."""
        with self._transaction(write=False) as tx:
            if node_id is None:
                rows = tx.rows("attempts_lease_lapsed", now=utcnow())
            else:
                rows = tx.rows("attempts_live_of_node", node_id=node_id)
            return [attempt_from_row(r) for r in rows]

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
