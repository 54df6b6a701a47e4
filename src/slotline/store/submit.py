"""Submitting tasks: checked against the queue's bounds, created in one transaction."""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from slotline.clock import iso
from slotline.errors import BoundExceeded, InvalidInput
from slotline.models import Status, Task
from slotline.store import dedup, deps, estimates, serving
from slotline.store.core import Ahead, Serial, StoreCore
from slotline.store.queries import Tx
from slotline.store.rows import dumps, isolation_to_text
from slotline.store.settings import Settings, read_settings
from slotline.store.statements import Read
from slotline.store.tasks import count_of, next_ranks, resolve
from slotline.worktrees.isolation import Isolation, KeepPolicy

if TYPE_CHECKING:  # imported when used: a read needs no pydantic model
    from slotline.spec import TaskSpec

# How far in the past a start time may be and still be taken as "now" (seconds).
RUN_AT_GRACE = 60.0


class SubmitVerbs(StoreCore):
    """submit and submit_many."""

    def submit(
        self,
        spec: TaskSpec | dict[str, Any],
        now: float | None = None,
        *,
        within: str | None = None,
    ) -> Task:
        """Create a task: queued, waiting on dependencies, held, or blocked by a bad one.
        `within` is as for `submit_many`.

        Raises:
            InvalidInput: the spec is malformed.
            UnknownDependency: a `depends_on` id does not exist.
            BoundExceeded: queue size, depth or children bound reached; nothing created.
            InvalidTransition: its key names a task outside `within`'s subtree.
        """
        return self.submit_many([spec], now, within=within)[0]

    def submit_many(
        self,
        specs: Iterable[TaskSpec | dict[str, Any]],
        now: float | None = None,
        *,
        within: str | None = None,
    ) -> list[Task]:
        """Submit several tasks in one transaction: all are created or none.

        `within` is the task whose subtree the submitter sees (a task token's): a key
        that names a task outside it refuses the whole batch, which then neither
        creates nor logs anything, rather than show that task.

        The rows, dependency edges and events of the batch are written with one
        statement each (`executemany`), and the tasks returned are built from what was
        written, not read back.
        """
        from slotline.spec import parse_spec
        from slotline.worktrees.pinning import pin

        # A worktree task's repository and base commit are checked (and pinned) here,
        # before the transaction: the git calls never hold the writer.
        parsed = [pin(parse_spec(s)) for s in specs]
        try:
            with self._write(serial_of(parsed, within), _ahead(parsed)) as tx:
                now = tx.now() if now is None else now
                return create_tasks(tx, parsed, now, within=within)
        except BoundExceeded as refused:
            self._add_retry_hint(refused)
            raise

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


def _ahead(parsed: list[TaskSpec]) -> Ahead:
    """What a submit reads first, sent with the round trip that takes its locks (on
    PostgreSQL): the count of tasks in line (a submit reads it under the submit lock, and
    only submits add to it), and the batch's ranks when no key may drop a spec (a rank
    left unused by a refused batch is rolled back with it)."""
    if not parsed:
        return ()
    ahead = [Read("count_pending")]
    if all(spec.key is None for spec in parsed):
        ahead.append(Read("counter_add", {"name": "rank", "n": len(parsed)}))
    return ahead


def serial_of(parsed: list[TaskSpec], within: str | None) -> Serial:
    """What a submit of `parsed` waits for (see `Serial`): only other submits when it
    reads no other task; else every write, so that it sees a dependency's or parent's
    end (or a key's task) as committed, never between its check and its insert."""
    reads_tasks = within is not None or any(
        spec.depends_on or spec.parent_id is not None or spec.key is not None for spec in parsed
    )
    return Serial.BOTH if reads_tasks else Serial.SUBMITS


def create_tasks(
    tx: Tx,
    parsed: list[TaskSpec],
    now: float,
    schedule: str | None = None,
    within: str | None = None,
) -> list[Task]:
    """Create the tasks of `parsed` in the caller's transaction, in order; a spec whose
    idempotency key names a task gets that task (marked `deduplicated`) and creates
    nothing, nor counts against the bounds. `schedule` names the recurring schedule that
    submits them; `within` limits what a key may name to that task's subtree.

    Raises:
        BoundExceeded: a bound would be exceeded; nothing is created.
        InvalidTransition: a key names a task outside `within`'s subtree.
    """
    settings = read_settings(tx)
    found = dedup.existing(tx, parsed, now, within)
    fresh = [spec for spec, item in zip(parsed, found, strict=True) if item is None]
    pending = count_of(tx, "count_pending")
    bound = settings["max_queue_size"]
    if fresh and pending + len(fresh) > bound:
        raise BoundExceeded(
            f"queue is full: {pending} tasks wait, max_queue_size is {bound}",
            limit="max_queue_size",
            max=bound,
        )
    _check_user_bound(tx, fresh, settings["max_queued_per_user"])
    batch = _Batch(tx, settings, now, schedule)
    for spec, rank in zip(fresh, next_ranks(tx, len(fresh)), strict=True):
        batch.add(spec, rank)
    return dedup.merge(found, batch.write())


def start_time(spec: TaskSpec, now: float) -> float | None:
    """When a delayed task may start (None: at once). A time up to `RUN_AT_GRACE`
    seconds past is taken as now (clocks differ a little); an earlier one is refused.

    Raises:
        InvalidInput: `run_at` is in the past, or the queue TTL ends before the start.
    """
    at = now + spec.delay if spec.delay is not None else spec.run_at
    if at is None:
        return None
    if at < now - RUN_AT_GRACE:
        raise InvalidInput(
            f"run_at {iso(at)} is {now - at:.0f}s in the past (the store's clock says "
            f"{iso(now)}); give a later time, or none to start as soon as possible"
        )
    if at <= now:
        return None
    if spec.queue_ttl is not None and at - now >= spec.queue_ttl:
        raise InvalidInput(
            f"queue_ttl {spec.queue_ttl:g}s would expire the task before its start time "
            f"{iso(at)}; the TTL counts from the submit"
        )
    return at


class _Batch:
    """The tasks of one submit, checked one by one against the bounds and written
    together."""

    def __init__(self, tx: Tx, settings: Settings, now: float, schedule: str | None) -> None:
        self.tx, self.settings, self.now, self.schedule = tx, settings, now, schedule
        self.rows: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        # The repository and isolation of the tasks that have them.
        self.isolated: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.tasks: list[Task] = []
        # Children given to each parent by this batch so far (not yet in the table).
        self.children: Counter[str] = Counter()

    def add(self, spec: TaskSpec, rank: str) -> None:
        parent_id, depth = None, 0
        if spec.parent_id is not None:
            parent_id, depth = self._parent_depth(spec.parent_id)
        needs = deps.resolve_dependencies(self.tx, spec.depends_on)
        status, reason = deps.initial_status(needs, spec.hold)
        run_at = start_time(spec, self.now)
        isolation = None
        if spec.isolation is not None:
            keep = spec.keep or KeepPolicy.ON_FAILURE
            isolation = Isolation(spec.base, spec.base_commit, keep)
        task = Task(
            id=secrets.token_hex(16),
            kind=spec.resolved_kind,
            command=tuple(spec.command),
            callable=spec.callable,
            # As a read returns them: JSON has no tuples and only string keys.
            args=json.loads(dumps(spec.args)) if spec.args else {},
            title=spec.display_title(),
            agent=spec.agent,
            workspace=spec.workspace,
            user=spec.user,
            labels=dict(spec.labels),
            env=dict(spec.env),
            priority=spec.priority,
            boosted=False,
            start_now=False,
            rank=rank,
            status=status,
            status_reason=reason,
            depends_on=tuple(d.id for d in needs),
            parent_id=parent_id,
            depth=depth,
            max_attempts=spec.max_attempts,
            backoff=float(spec.backoff),
            timeout=spec.timeout,
            queue_ttl=spec.queue_ttl,
            not_before=run_at,
            kill_request=None,
            restart_requested=False,
            created_at=self.now,
            queued_at=self.now if status in (Status.QUEUED, Status.HELD) else None,
            started_at=None,
            finished_at=None,
            exit_code=None,
            failure_reason=None,
            attempt_count=0,
            attempt_base=0,
            current_attempt=None,
            memory_mb=spec.memory_mb,
            expected_duration=spec.expected_duration,
            hold_when_ready=spec.hold and status is Status.WAITING,
            key=spec.key,
            run_at=run_at,
            schedule=self.schedule,
            repo=spec.repo,
            isolation=isolation,
            interactive=spec.interactive,
            first_input=spec.first_input,
        )
        self.tasks.append(task)
        if task.repo is not None:
            self.isolated.append(
                {"id": task.id, "repo": task.repo, "isolation": isolation_to_text(isolation)}
            )
        self.rows.append(
            {
                "id": task.id,
                "kind": task.kind.value,
                "command": dumps(task.command),
                "callable": task.callable,
                "args": dumps(task.args),
                "title": task.title,
                "agent": task.agent,
                "workspace": task.workspace,
                "owner": task.user,
                "labels": dumps(task.labels),
                "env": dumps(task.env),
                "priority": int(task.priority),
                "rank": rank,
                "status": status.value,
                "status_reason": reason,
                "depends_on": dumps(task.depends_on),
                "parent_id": parent_id,
                "depth": depth,
                "max_attempts": task.max_attempts,
                "backoff": task.backoff,
                "timeout": task.timeout,
                "queue_ttl": task.queue_ttl,
                "created_at": self.now,
                "queued_at": task.queued_at,
                "memory_mb": task.memory_mb,
                "expected_duration": task.expected_duration,
                "hold_when_ready": task.hold_when_ready,
                "dedup_key": task.key,
                "run_at": run_at,
                "schedule": self.schedule,
                "interactive": task.interactive,
                "first_input": task.first_input,
            }
        )
        self.edges.extend({"task_id": task.id, "dep_id": dep.id} for dep in needs)
        data = {
            "to": status.value,
            "title": task.title,
            "priority": spec.priority.label,
            "parent_id": parent_id,
            "reason": reason,
        }
        extra = {"key": spec.key, "run_at": iso(run_at), "schedule": self.schedule}
        data.update({name: value for name, value in extra.items() if value is not None})
        self.events.append(
            {"at": self.now, "kind": "submitted", "task_id": task.id, "data": dumps(data)}
        )

    def _parent_depth(self, parent_ref: str) -> tuple[str, int]:
        parent = resolve(self.tx, parent_ref)
        depth = parent.depth + 1
        bound = self.settings["max_depth"]
        if depth > bound:
            raise BoundExceeded(
                f"task {parent.id[:8]} is at depth {parent.depth}; max_depth is {bound}",
                limit="max_depth",
                max=bound,
            )
        children = count_of(self.tx, "count_active_children", parent_id=parent.id)
        children += self.children[parent.id]
        bound = self.settings["max_children"]
        if children >= bound:
            raise BoundExceeded(
                f"task {parent.id[:8]} already has {children} active children; "
                f"max_children is {bound}",
                limit="max_children",
                max=bound,
                parent_id=parent.id,
            )
        self.children[parent.id] += 1
        return parent.id, depth

    def write(self) -> list[Task]:
        """Write the batch; the tasks as a read of them would return them (a function
        task that no live node serves says so)."""
        self.tx.run_many("task_insert", self.rows)
        self.tx.run_many("task_set_isolation", self.isolated)
        self.tx.run_many("dep_insert", self.edges)
        self.tx.append_events(self.events)
        return serving.annotate(self.tx, self.tasks)


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
