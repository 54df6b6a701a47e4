"""The store's reads: one task, pages of tasks, the line with positions and ETAs, the
capacity (`status`), and the dashboard's page of the line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from slotline.line import STATUS_HEAD, next_up
from slotline.models import Attempt, Status, Task, TaskPage, copy_task
from slotline.store import backoff, budgets, estimates, listing, rates, serving
from slotline.store.core import StoreCore
from slotline.store.events import last_seq
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, task_from_row
from slotline.store.settings import Settings, read_settings
from slotline.store.statements import Where
from slotline.store.tasks import (
    count_of,
    load,
    ordered_queue,
    reordered,
    resolve,
    with_attempts,
)

if TYPE_CHECKING:  # imported when used: a read needs no pydantic model
    from slotline.scheduler import eta
    from slotline.taskfilter import ListQuery, TaskFilter


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
    # Asked for (`status --mine`): the caller's tasks that have not ended.
    mine: list[Task] | None = None
    # How many are queued in all: more than `queued` holds when the status is of the head,
    # or holds only what the caller may see. Then `next_up_hidden`: the first in line is
    # not the caller's to see (`next_up` is None).
    queued_total: int | None = None
    next_up_hidden: bool = False
    # Each rate limit in force, with the starts in its window and when the next start is
    # allowed (None: now); each agent type backing off from its provider.
    rates: list[dict[str, Any]] = field(default_factory=list)
    backoff: list[dict[str, Any]] = field(default_factory=list)
    # Each budget in force, with what its window holds and, if reached, until when.
    budgets: list[dict[str, Any]] = field(default_factory=list)
    # The task expected to start first when it is not in `queued` (a head too short to
    # hold it: a per-key limit keeps those ahead of it waiting).
    next_up_beyond: str | None = None

    @property
    def slots_available(self) -> int:
        return max(0, self.max_concurrent - self.active)

    @property
    def at_capacity(self) -> bool:
        return self.active >= self.max_concurrent

    @property
    def capacity(self) -> str | None:
        """The state of capacity, one at a time, as the CLI and the dashboard say it:
        `no_slots` (max_concurrent is 0: nothing starts), `over_limit` (a started-now task
        runs past the limit), `full` (every slot is taken), or None (a slot is free)."""
        if self.max_concurrent == 0:
            return "no_slots"
        if self.over_limit or self.active > self.max_concurrent:
            return "over_limit"
        return "full" if self.at_capacity else None

    @property
    def next_up(self) -> str | None:
        """The id of the task expected to start first (`line.next_up`), unless it is
        not the caller's to see."""
        if self.next_up_hidden:
            return None
        first = next_up(self.queued)
        return self.next_up_beyond or (None if first is None else first.id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "active": self.active,
            "max_concurrent": self.max_concurrent,
            "slots_available": self.slots_available,
            "at_capacity": self.at_capacity,
            "capacity": self.capacity,
            "paused": self.paused,
            "admission_hold": self.admission,
            "over_limit": self.over_limit,
            "next_up": self.next_up,
            "queued_total": len(self.queued) if self.queued_total is None else self.queued_total,
            "running": [t.to_dict() for t in self.running],
            "queued": [t.to_dict() for t in self.queued],
            **({} if self.mine is None else {"mine": [t.to_dict() for t in self.mine]}),
            "rates": self.rates,
            "backoff": self.backoff,
            "budgets": self.budgets,
        }


@dataclass(frozen=True, slots=True)
class Line:
    """One page of the line, as the dashboard shows it: capacity and running tasks (in
    `status`, whose `queued` is the page), how many are queued in all (or match the
    filter), the first in line, the tasks kept out of it (held, waiting), and the settings,
    last event seq and store clock as of the same read."""

    status: QueueStatus
    queued_total: int
    next_up: str | None
    parked: list[Task]
    parked_total: int
    settings: Settings
    last_seq: int
    now: float


# NEXT UP of a page of the line is looked for among this many at its head.
NEXT_UP_HEAD = 100
# Held and waiting tasks shown below the line, at most.
PARKED_SHOWN = 200
# The statuses of a task that has not ended.
_LIVE = (Status.WAITING, Status.QUEUED, Status.HELD, Status.RUNNING, Status.BLOCKED)
# A read of rows in SQL that a caller's scope bounds, not a page.
_ALL_ROWS = 1_000_000


class ReadVerbs(StoreCore):
    """Reads: each one read transaction."""

    def get(self, ref: str, user: str | None = None, estimate: bool = True) -> Task:
        """One task with its attempts and, if queued, its position. `ref` is an id, a
        dashed UUID or a unique prefix; with `user`, only that user's tasks match.

        The position is a count of the tasks ahead through the queue-order index. The
        ETA (`estimate`) simulates the line up to the task (the whole line for a held or
        waiting one), which costs time in proportion to it (cached until the next
        change); without it, a read costs the same in any line.

        Raises:
            NotFound: no task has that id or prefix (or none of `user`'s).
            AmbiguousId: the prefix matches several tasks.
        """
        with self._transaction(write=False) as tx:
            return shown(tx, self.url, resolve(tx, ref, user), estimate)

    def list_tasks(self, status: Status | None = None, limit: int = 10_000) -> list[Task]:
        """Tasks in submission order, optionally of one status; queued ones carry positions."""
        from slotline.taskfilter import ListQuery, TaskFilter

        wanted = TaskFilter(status=[status]) if status is not None else None
        return self.list_page(ListQuery(wanted, limit=limit)).tasks

    def list_page(self, query: ListQuery | None = None) -> TaskPage:
        """One page of the tasks `query` asks for, in submission order (oldest first, or
        `newest` first; ties by id), or with `ended` only ended tasks, the last to end
        first; filtered, ordered and cut in SQL (the fields: `ListQuery`).

        Raises:
            NotFound: no task (of `owner`) matches `after`.
            InvalidInput: with `ended`, the task `after` names has not ended.
        """
        if query is None:
            from slotline.taskfilter import ListQuery

            query = ListQuery()
        with self._transaction(write=False) as tx:
            return listing.page(tx, self.url, query)

    def subtree(self, task_id: str) -> list[str]:
        """The ids of a task and of all its descendants (subtasks, theirs…); empty when
        no task has the full id `task_id`."""
        with self._transaction(write=False) as tx:
            return [str(r["id"]) for r in tx.rows("tasks_subtree", id=task_id)]

    def mine(self, root: str | None = None, user: str | None = None) -> list[Task]:
        """The live tasks (not ended) of the subtree of task `root` (it included), or of
        `user`, with positions and estimates, oldest first.

        Only those tasks are read (in SQL), never the line: their positions are counted
        through the queue-order index and their ETAs simulated as a page of `list_page`
        gets them (`listing.dress`: in a line longer than `listing.ETA_WHOLE`, a task
        farther back has none)."""
        from slotline.taskfilter import TaskFilter

        where = listing.where_of(TaskFilter(status=list(_LIVE)), user, root)
        with self._transaction(write=False) as tx:
            rows = tx.select("tasks_page", where, limit=_ALL_ROWS, offset=0)
            if not rows:
                return []
            found = listing.dress(tx, self.url, [task_from_row(r) for r in rows])
            if not any(t.status is Status.QUEUED for t in found):
                return found
            first = _next_up(tx, tx.now(), _estimates_to(tx, self.url, NEXT_UP_HEAD))
            return [copy_task(t, next_up=True) if t.id == first else t for t in found]

    def status(
        self, now: float | None = None, *, limit: int = STATUS_HEAD, all: bool = False
    ) -> QueueStatus:
        """Capacity (active of max, slots free) and the queued tasks in order: the first
        `limit` (the head of the line), or with `all` every one of them; `queued_total`
        says how many there are in all.

        The head of a long line is read through the queue-order index, so its cost does
        not grow with the line (unless aging is on: aged priorities are not indexed). Its
        ETAs come from simulating the running tasks and that head alone; see
        `estimates.head_estimates`. The whole line (`all`) costs time in proportion to it.
        """
        with self._transaction(write=False) as tx:
            now = tx.now() if now is None else now
            settings = read_settings(tx)
            running = [with_attempts(tx, task_from_row(r)) for r in tx.rows("tasks_running")]
            if all or reordered(settings):
                queue = ordered_queue(tx, now, settings["aging_interval"])
                total, queue = len(queue), queue if all else queue[: max(limit, NEXT_UP_HEAD)]
            else:
                # NEXT UP is looked for among the first NEXT_UP_HEAD (as every read does),
                # whatever the head shown.
                total = count_of(tx, "count_queued")
                wide = max(limit, NEXT_UP_HEAD)
                rows = tx.rows("tasks_queued_in_order", limit=wide, offset=0)
                queue = [task_from_row(r) for r in rows]
            if len(queue) < total and not reordered(settings):
                etas = estimates.head_estimates(tx, now, len(queue), self.url)
            else:
                etas = estimates.line_estimates(tx, now, self.url)
            running = [estimates.with_estimate(t, etas, now) for t in running]
            placed = [
                estimates.with_estimate(t, etas, now, position=i) for i, t in enumerate(queue, 1)
            ]
            placed = serving.annotate(tx, placed)
            first = next_up(placed if all else placed[:NEXT_UP_HEAD])
            shown = [
                copy_task(t, next_up=True) if first is not None and t.id == first.id else t
                for t in (placed if all else placed[:limit])
            ]
            beyond = first.id if first is not None and not any(t.next_up for t in shown) else None
            status = _queue_status(tx, settings, running, shown, now)
            return replace(status, queued_total=total, next_up_beyond=beyond)

    def line(
        self,
        offset: int = 0,
        limit: int = 100,
        wanted: TaskFilter | None = None,
        owner: str | None = None,
        root: str | None = None,
    ) -> Line:
        """Capacity, running tasks, and queued tasks `offset`..`offset+limit` in queue
        order with their positions; with a filter (`wanted`, the scope `owner` or `root`:
        see `list_page`), only the queued (and parked) tasks that match, still with their
        positions in the whole line. Only the page is read, unless aging is on."""
        with self._transaction(write=False) as tx:
            now = tx.now()
            settings = read_settings(tx)
            aging = settings["aging_interval"]
            running = [with_attempts(tx, task_from_row(r)) for r in tx.rows("tasks_running")]
            where = listing.where_of(wanted, owner, root)
            if reordered(settings):
                queue = ordered_queue(tx, now, aging)
                kept = set(_ids(tx, where)) if where.groups else None
                placed = [copy_task(t, position=i) for i, t in enumerate(queue, 1)]
                placed = [t for t in placed if kept is None or t.id in kept]
                total, page = len(placed), placed[offset : offset + limit]
            else:
                page, total = listing.queued_page(tx, where, offset, limit)
            parked, parked_total = listing.parked(tx, where, PARKED_SHOWN)
            # Up to the page, not the whole line (in a long one, parked tasks get none).
            etas = _estimates_to(tx, self.url, max((t.position or 0 for t in page), default=0))
            next_up_id = _next_up(tx, now, etas)
            running = [estimates.with_estimate(t, etas, now) for t in running]
            page = [estimates.with_estimate(t, etas, now, next_up=t.id == next_up_id) for t in page]
            page = serving.annotate(tx, page)
            parked = [estimates.with_estimate(t, etas, now) for t in parked]
            status = _queue_status(tx, settings, running, page, now)
            seq = last_seq(tx)
            return Line(status, total, next_up_id, parked, parked_total, settings.copy(), seq, now)

    def dependents(self, task_id: str) -> list[Task]:
        """The tasks that depend on the task `task_id` (full id), oldest first."""
        with self._transaction(write=False) as tx:
            found = [load(tx, r["task_id"]) for r in tx.rows("dependents_of", dep_id=task_id)]
            return sorted(found, key=lambda t: t.created_at)

    def attempts(self) -> list[Attempt]:
        """Every attempt ever made, by start time (for audits and stats)."""
        with self._transaction(write=False) as tx:
            return [attempt_from_row(r) for r in tx.rows("attempts_all")]

    def counts(self, owner: str | None = None) -> dict[str, int]:
        """Number of tasks in each status (only `owner`'s tasks when given)."""
        with self._transaction(write=False) as tx:
            if owner is None:
                rows = tx.rows("count_by_status")
            else:
                rows = tx.rows("count_by_status_of_user", user=owner)
            return {r["status"]: int(r["n"]) for r in rows}

    def oldest_queued_at(self, owner: str | None = None, root: str | None = None) -> float | None:
        """When the task in line longest was queued (None: the line is empty), of every
        queued task or of a scope (`owner`'s tasks; the subtree of the task `root`), read
        in SQL, without loading the line."""
        from slotline.taskfilter import TaskFilter

        where = listing.where_of(TaskFilter(status=[Status.QUEUED]), owner, root)
        with self._transaction(write=False) as tx:
            (row,) = tx.select("oldest_queued_at", where)
            return None if row["at"] is None else float(row["at"])


def _next_up(tx: Tx, now: float, etas: Mapping[str, eta.Estimate]) -> str | None:
    """The id of the task expected to start first (`line.next_up`), looked for among
    the first NEXT_UP_HEAD in line, with their estimates `etas`: one rule for every read."""
    settings = read_settings(tx)
    if reordered(settings):
        head = ordered_queue(tx, now, settings["aging_interval"])[:NEXT_UP_HEAD]
    else:
        rows = tx.rows("tasks_queued_in_order", limit=NEXT_UP_HEAD, offset=0)
        head = [task_from_row(r) for r in rows]
    placed = (estimates.with_estimate(t, etas, now, position=i) for i, t in enumerate(head, 1))
    first = next_up(placed)
    return None if first is None else first.id


def _estimates_to(tx: Tx, url: str, farthest: int) -> Mapping[str, eta.Estimate]:
    """Estimates of the running tasks and of the line up to position `farthest` (and
    the first NEXT_UP_HEAD, which `_next_up` looks among): the whole line's when it is
    short (`listing.ETA_WHOLE`, as a page of `list_page` has them) or reordered by aging
    or fairness, else its head's (`estimates.head_estimates`, up to a power of two, so
    that a few simulations are kept). The cost grows with `farthest`, not with the
    line; in a long line the held and waiting tasks get none."""
    head = 1 << (max(farthest, NEXT_UP_HEAD) - 1).bit_length()
    whole = max(head, listing.ETA_WHOLE)
    short = tx.one("tasks_queued_in_order", limit=1, offset=whole) is None
    if short or reordered(read_settings(tx)):
        return estimates.line_estimates(tx, tx.now(), url)
    return estimates.head_estimates(tx, tx.now(), head, url)


def _queue_status(
    tx: Tx, settings: Settings, running: list[Task], queued: list[Task], now: float
) -> QueueStatus:
    book = rates.load_book(tx, settings.rates, now) if settings.rates else None
    spend = budgets.load_book(tx, settings.budgets, now)
    queued = budgets.annotate(spend, queued, now)
    throttles = [{**t.to_dict(), "holding": t.not_before > now} for t in backoff.throttles(tx)]
    return QueueStatus(
        active=sum(1 for t in running if t.holds_slot and settings.limits.in_pool(t)),
        max_concurrent=settings.limits.max_concurrent,
        paused=bool(settings["paused"]),
        admission=_admission(tx.rows("nodes_pressed")),
        over_limit=any(a.over_limit and a.finished_at is None for t in running for a in t.attempts),
        queued=queued,
        running=running,
        rates=[] if book is None else book.status(now),
        backoff=throttles,
        budgets=[] if spend is None else spend.state(now),
    )


def _ids(tx: Tx, where: Where) -> list[str]:
    """The ids of every queued task that matches `where` (with aging, whose order is not
    SQL's)."""
    matched = Where([*where.groups]).all("tasks_where_status", status=Status.QUEUED.value)
    return [str(r["id"]) for r in tx.select("tasks_page", matched, limit=1_000_000, offset=0)]


def _admission(pressed: list[dict[str, Any]]) -> str | None:
    """Why nodes hold new starts: one node's reason, or each pressed node's by name."""
    if len(pressed) == 1:
        return str(pressed[0]["pressure"])
    return "; ".join(f"{row['id']}: {row['pressure']}" for row in pressed) or None


def shown(tx: Tx, url: str, task: Task, estimate: bool = True) -> Task:
    """`task` as `get` shows it: with its attempts and, if queued, its position (and
    with `estimate`, its ETA: `estimated`), read in `tx`."""
    position = None
    if task.status is Status.QUEUED:
        if reordered(read_settings(tx)):
            position = _positions(tx).get(task.id)
        else:  # the stored order is the queue order: count who is ahead
            position = count_of(
                tx, "queue_position", boosted=task.boosted,
                priority=int(task.priority), rank=task.rank,
            )  # fmt: skip
    task = serving.annotate(tx, [with_attempts(tx, task, position)])[0]
    if task.status is Status.QUEUED:
        now = tx.now()
        spend = budgets.load_book(tx, read_settings(tx).budgets, now)
        task = budgets.annotate(spend, [task], now)[0]
    return estimated(tx, url, task) if estimate else task


def estimated(tx: Tx, url: str, task: Task) -> Task:
    """`task` with its ETA, if it is running or in line: a simulation of the line up to
    a queued task (`_estimates_to`), or of the whole line for a held or waiting one,
    which costs in proportion to it (kept per `url` until the next change), so never
    run while holding the writer."""
    if task.status not in estimates.IN_LINE:
        return task
    now = tx.now()
    if task.status is Status.QUEUED and task.position is not None:  # the line up to it
        etas = _estimates_to(tx, url, task.position)
    elif task.status is Status.RUNNING:
        etas = _estimates_to(tx, url, 0)
    else:  # held or waiting: where it joins, only the whole line's simulation says
        etas = estimates.line_estimates(tx, now, url)
    first = _next_up(tx, now, etas) if task.status is Status.QUEUED else None
    return estimates.with_estimate(task, etas, now, next_up=task.id == first)


def _positions(tx: Tx) -> dict[str, int]:
    aging = read_settings(tx)["aging_interval"]
    return {t.id: i for i, t in enumerate(ordered_queue(tx, tx.now(), aging), 1)}
