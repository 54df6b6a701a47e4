"""The store: domain verbs, each one transaction that checks the transition and logs events.

Backends (SQLite, PostgreSQL) supply a connection, a serialized write transaction and
change notification; every verb, transition check and event is written once, in these
modules: reads and submit here, the steering verbs (cancel, move, restart…) in
`steering.py` and `settings_verbs.py`, the run lifecycle in `runs.py`, node bookkeeping in
`nodes.py`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from slotline.errors import BoundExceeded
from slotline.models import Attempt, Event, Status, Task, utcnow
from slotline.spec import TaskSpec, parse_spec
from slotline.store import deps, ops
from slotline.store.nodes import NodeVerbs
from slotline.store.ops import Settings
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, dumps, event_from_row, task_from_row
from slotline.store.runs import RunVerbs


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


class Store(RunVerbs, NodeVerbs):
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
                if ops.read_settings(tx)["aging_interval"]:
                    position = self._positions(tx).get(task.id)
                else:  # the stored order is the queue order: count who is ahead
                    position = ops.count(
                        tx, "queue_position", boosted=task.boosted,
                        priority=int(task.priority), rank=task.rank,
                    )  # fmt: skip
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
            # Attempts in one query, not one per task: a listing reads two result sets.
            if status is None:
                attempt_rows = tx.rows("attempts_all")
            else:
                attempt_rows = tx.rows("attempts_by_task_status", status=Status(status).value)
            attempts: dict[str, list[Attempt]] = {}
            for row in attempt_rows:
                attempts.setdefault(row["task_id"], []).append(attempt_from_row(row))
            return [
                replace(
                    task_from_row(r),
                    attempts=tuple(sorted(attempts.get(r["id"], ()), key=lambda a: a.number)),
                    position=positions.get(r["id"]),
                )
                for r in rows
            ]

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
            hold_when_ready=spec.hold and status is Status.WAITING,
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
