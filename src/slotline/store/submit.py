"""Submitting tasks: checked against the queue's bounds, created in one transaction."""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from slotline.errors import BoundExceeded
from slotline.models import Status, Task
from slotline.store import deps, estimates
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.rows import dumps
from slotline.store.settings import Settings, read_settings
from slotline.store.tasks import count_of, load, next_rank, resolve

if TYPE_CHECKING:  # imported when used: a read needs no pydantic model
    from slotline.spec import TaskSpec


class SubmitVerbs(StoreCore):
    """submit and submit_many."""

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
        from slotline.spec import parse_spec

        parsed = [parse_spec(s) for s in specs]
        try:
            with self._write() as tx:
                now = tx.now() if now is None else now
                settings = read_settings(tx)
                pending = count_of(tx, "count_pending")
                bound = settings["max_queue_size"]
                if pending + len(parsed) > bound:
                    raise BoundExceeded(
                        f"queue is full: {pending} tasks wait, max_queue_size is {bound}",
                        limit="max_queue_size",
                        max=bound,
                    )
                _check_user_bound(tx, parsed, settings["max_queued_per_user"])
                created = [self._insert(tx, spec, settings, now) for spec in parsed]
        except BoundExceeded as refused:
            self._add_retry_hint(refused)
            raise
        return [replace(t, position=None) for t in created]

    def _add_retry_hint(self, refused: BoundExceeded) -> None:
        """When a refused submit may succeed (`retry_after`, seconds), for a full queue or
        a parent with its most children. Read after the rollback from the estimates kept
        since the last change: a refusal never simulates the line while holding the writer."""
        limit = refused.details.get("limit")
        if limit not in ("max_queue_size", "max_queued_per_user", "max_children"):
            return
        with self._transaction(write=False) as tx:
            now = tx.now()
            etas = estimates.line_estimates(tx, now, self.url)
            refused.details["retry_after"] = estimates.seconds_until_room(
                tx, now, etas, refused.details.get("parent_id"), refused.details.get("user")
            )

    def _parent_depth(self, tx: Tx, parent_ref: str, settings: Settings) -> tuple[str, int]:
        parent = resolve(tx, parent_ref)
        depth = parent.depth + 1
        if depth > settings["max_depth"]:
            raise BoundExceeded(
                f"task {parent.id[:8]} is at depth {parent.depth}; max_depth is "
                f"{settings['max_depth']}",
                limit="max_depth",
                max=settings["max_depth"],
            )
        children = count_of(tx, "count_active_children", parent_id=parent.id)
        if children >= settings["max_children"]:
            raise BoundExceeded(
                f"task {parent.id[:8]} already has {children} active children; "
                f"max_children is {settings['max_children']}",
                limit="max_children",
                max=settings["max_children"],
                parent_id=parent.id,
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
            rank=next_rank(tx),
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
        emit(
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
        return load(tx, task_id)


def _check_user_bound(tx: Tx, specs: list[TaskSpec], bound: int | None) -> None:
    """Refuse the batch if it would put more than `bound` tasks of one user in line.

    Raises:
        BoundExceeded: with the user; nothing is created.
    """
    if bound is None:
        return
    adding = Counter(spec.user for spec in specs if spec.user is not None)
    for user, count in adding.items():
        pending = count_of(tx, "count_pending_of_user", user=user)
        if pending + count > bound:
            raise BoundExceeded(
                f"{user!r} has {pending} tasks waiting to start; max_queued_per_user is {bound}",
                limit="max_queued_per_user",
                max=bound,
                user=user,
            )
