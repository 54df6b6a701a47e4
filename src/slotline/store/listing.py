"""The task list and the filtered line: pages of tasks chosen, ordered and cut in SQL.

A filter (`TaskFilter`) and a scope (one user's tasks, or a task's subtree) become the
conditions of one composed query, so that a page reads the rows it shows, never the
whole table. The task list is in submission order (`created_at`, then `id`), oldest or
newest first, and continues after a task (keyset: tasks submitted meanwhile neither
repeat nor push others out of the next page) or at an offset. The filtered line is in
queue order.

Queued tasks carry their positions in the whole line: the first of a page is counted
through the queue-order index, the next ones from it, so a page costs a count to its
farthest task, not a sort of the line. ETAs come from simulating the whole line when it
is short (`ETA_WHOLE`), else its head up to the page's farthest task; past that head a
task has no ETA.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from slotline.errors import InvalidInput
from slotline.models import Attempt, Priority, Status, Task, TaskPage, copy_task
from slotline.scheduler import eta, policy
from slotline.store import budgets, estimates
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, task_from_row
from slotline.store.settings import read_settings
from slotline.store.statements import Where
from slotline.store.tasks import count_of, ordered_queue, reordered, resolve

if TYPE_CHECKING:
    from slotline.taskfilter import ListQuery, TaskFilter

# A line up to this long gets every ETA from one simulation of it (cached until the next
# change); a longer one only those of its head, up to the page's farthest task.
ETA_WHOLE = 1_000
# Attempts are read for this many tasks per query.
_CHUNK = 500
_HEX = frozenset("0123456789abcdef")


def where_of(
    wanted: TaskFilter | None,
    owner: str | None = None,
    root: str | None = None,
    parent_id: str | None = None,
) -> Where:
    """The SQL conditions of a filter, a scope (`owner`'s tasks; the subtree of the task
    `root`) and a parent."""
    where = Where()
    if owner is not None:
        where.all("tasks_where_owner", owner=owner)
    if root is not None:
        where.all("tasks_where_subtree", root=root)
    if parent_id is not None:
        where.all("tasks_where_parent", parent_id=parent_id)
    if wanted is None:
        return where
    where.any("tasks_where_status", ({"status": Status(s).value} for s in wanted.status))
    if wanted.agent is not None:
        where.all("tasks_where_agent", agent=wanted.agent)
    if wanted.workspace is not None:
        where.all("tasks_where_workspace", workspace=wanted.workspace)
    if wanted.user is not None:
        where.all("tasks_where_owner", owner=wanted.user)
    for label in wanted.label:
        where.all("tasks_where_label", needle=_label_needle(label))
    if wanted.q:
        text = wanted.q.casefold()
        prefix = text + "%" if set(text) <= _HEX else ""  # "" matches no id
        where.all("tasks_where_text", text=text.lower(), id_prefix=prefix)
    return where


def _label_needle(label: str) -> str:
    """`NAME` or `NAME=VALUE` as the stored labels spell it (`rows.dumps`: compact JSON)."""
    key, sep, value = label.partition("=")
    needle = json.dumps(key) + ":"
    return needle + json.dumps(value) if sep else needle


def page(tx: Tx, store: str, query: ListQuery) -> TaskPage:
    """One page of the task list (see `Store.list_page`)."""
    ended, limit, after = query.ended, query.limit, query.after
    where = where_of(query.wanted, query.owner, query.root, query.parent_id)
    if ended:
        where.all("tasks_where_ended")
    total = _count(tx, where) if query.count else None
    if after is not None:
        mark = resolve(tx, after, query.owner)
        if ended:
            if mark.finished_at is None:
                raise InvalidInput(f"task {mark.id[:8]} has not ended: no place in this order")
            where.all("tasks_where_ended_before", at=mark.finished_at, id=mark.id)
        else:
            beyond = "tasks_where_before" if query.newest else "tasks_where_after"
            where.all(beyond, at=mark.created_at, id=mark.id)
    name = "tasks_page_ended" if ended else "tasks_page_newest" if query.newest else "tasks_page"
    rows = tx.select(name, where, limit=limit + 1, offset=query.offset)
    tasks = dress(tx, store, [task_from_row(r) for r in rows[:limit]])
    return TaskPage(tasks, tasks[-1].id if len(rows) > limit else None, total)


def queued_page(tx: Tx, where: Where, offset: int, limit: int) -> tuple[list[Task], int]:
    """Queued tasks that match `where`, `offset`..`offset+limit` in queue order (without
    aging), with their positions in the whole line; and how many match in all."""
    rows = tx.select("queued_page", where, limit=limit, offset=offset)
    total = _count(tx, Where([*where.groups]).all("tasks_where_status", status="queued"))
    tasks = [task_from_row(r) for r in rows]
    if not where.groups:  # the line itself: the page's place is its position
        return [copy_task(t, position=offset + i) for i, t in enumerate(tasks, 1)], total
    found = positions(tx, tasks)
    return [copy_task(t, position=found.get(t.id)) for t in tasks], total


def parked(tx: Tx, where: Where, shown: int) -> tuple[list[Task], int]:
    """The held, then the waiting tasks that match `where` (the first `shown` of them,
    oldest first), and how many match in all."""
    found: list[Task] = []
    for status in (Status.HELD, Status.WAITING):
        of_status = Where([*where.groups]).all("tasks_where_status", status=status.value)
        rows = tx.select("tasks_page", of_status, limit=max(0, shown - len(found)), offset=0)
        found.extend(task_from_row(r) for r in rows)
    parked = Where([*where.groups]).any(
        "tasks_where_status", [{"status": Status.HELD.value}, {"status": Status.WAITING.value}]
    )
    return found, _count(tx, parked)


def dress(tx: Tx, store: str, tasks: list[Task]) -> list[Task]:
    """`tasks` with their attempts, the queued ones with positions, and ETAs."""
    attempts = _attempts(tx, [t.id for t in tasks])
    found = positions(tx, [t for t in tasks if t.status is Status.QUEUED])
    etas = _estimates(tx, store, tasks, found)
    now = tx.now()
    dressed = [
        estimates.with_estimate(
            t, etas, now, attempts=attempts.get(t.id, ()), position=found.get(t.id)
        )
        for t in tasks
    ]
    if not found:
        return dressed
    return budgets.annotate(budgets.load_book(tx, read_settings(tx).budgets, now), dressed, now)


def positions(tx: Tx, queued: Iterable[Task]) -> dict[str, int]:
    """The positions in the whole line of some queued tasks, by id.

    Without aging, the first of them in queue order is counted from the head, and each
    next one from the one before: a count through the queue-order index to the farthest
    of them, wherever they are in the line. With aging (aged priorities are not indexed),
    the line is ordered in full.
    """
    ordered = sorted(queued, key=lambda t: policy.queue_key(t, 0.0, None))
    if not ordered:
        return {}
    settings = read_settings(tx)
    aging = settings["aging_interval"]
    if reordered(settings):
        wanted = {t.id for t in ordered}
        line = ordered_queue(tx, tx.now(), aging)
        return {t.id: i for i, t in enumerate(line, 1) if t.id in wanted}
    first = ordered[0]
    position = count_of(
        tx, "queue_position", boosted=first.boosted, priority=int(first.priority), rank=first.rank
    )
    found = {first.id: position}
    for ahead, task in itertools.pairwise(ordered):
        position += 1 + _between(tx, ahead, task)
        found[task.id] = position
    return found


def _between(tx: Tx, ahead: Task, behind: Task) -> int:
    """How many queued tasks stand strictly between two, `ahead` being ahead: ranges of
    the queue-order index (the rest of `ahead`'s band, the bands between, the start of
    `behind`'s)."""
    boosted, a, b = bool(ahead.boosted), int(ahead.priority), int(behind.priority)
    if (boosted, a) == (behind.boosted, b):
        return count_of(
            tx, "queue_rank_between", boosted=boosted, priority=a, lo=ahead.rank, hi=behind.rank
        )
    n = count_of(tx, "queue_rank_after", boosted=boosted, priority=a, lo=ahead.rank)
    n += count_of(tx, "queue_rank_before", boosted=bool(behind.boosted), priority=b, hi=behind.rank)
    if boosted == behind.boosted:
        return n + count_of(tx, "queue_bands_between", boosted=boosted, lo=a, hi=b)
    # `ahead` is boosted and `behind` is not: the boosted bands after `ahead`'s, then the
    # unboosted ones before `behind`'s.
    n += count_of(tx, "queue_bands_between", boosted=True, lo=a, hi=len(Priority))
    return n + count_of(tx, "queue_bands_between", boosted=False, lo=-1, hi=b)


def _count(tx: Tx, where: Where) -> int:
    rows = tx.select("tasks_page_count", where)
    return int(rows[0]["n"]) if rows else 0


def _attempts(tx: Tx, ids: list[str]) -> dict[str, tuple[Attempt, ...]]:
    found: dict[str, list[Attempt]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        where = Where().all("attempts_where_tasks", ids=tuple(chunk))
        for row in tx.select("attempts_page", where):
            found.setdefault(row["task_id"], []).append(attempt_from_row(row))
    return {task_id: tuple(attempts) for task_id, attempts in found.items()}


def _estimates(
    tx: Tx, store: str, tasks: list[Task], found: Mapping[str, int]
) -> Mapping[str, eta.Estimate]:
    if not any(t.status in estimates.IN_LINE for t in tasks):
        return {}
    now = tx.now()
    # With aging or fairness on, the head's order depends on the whole line (as in
    # `Store.status`).
    whole = tx.one("tasks_queued_in_order", limit=1, offset=ETA_WHOLE) is None
    if reordered(read_settings(tx)) or whole:
        return estimates.line_estimates(tx, now, store)
    # In a long line, a task farther back than ETA_WHOLE has none; those ahead keep theirs.
    near = [position for position in found.values() if position <= ETA_WHOLE]
    if not near and not any(t.status is Status.RUNNING for t in tasks):
        return {}
    return estimates.head_estimates(tx, now, max(near, default=0), store)
