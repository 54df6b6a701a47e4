"""A task's row inside the caller's transaction: found by id or prefix, with its attempts,
counted, read in line order, and placed in the line (ranks)."""

from __future__ import annotations

from typing import Any

from slotline.bounds import parse_id
from slotline.errors import AmbiguousId, NotFound
from slotline.models import Task, copy_task
from slotline.scheduler import policy
from slotline.scheduler.fairness import Fairness
from slotline.scheduler.ranks import between, seq_rank
from slotline.store import fairness as fair
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, task_from_row
from slotline.store.settings import Settings, read_settings


def load(tx: Tx, task_id: str) -> Task:
    row = tx.one("task_get", id=task_id)
    if row is None:
        raise NotFound(f"no task {task_id}", task_id=task_id)
    return task_from_row(row)


def resolve(tx: Tx, ref: str, user: str | None = None) -> Task:
    """A task by full id (or dashed UUID) or unique prefix.

    With `user`, only that user's tasks match: a prefix shared with another user's task
    is not ambiguous, and another user's task is not found, so an answer never tells a
    user that a task of someone else exists.
    """
    ref = parse_id(ref)
    row = tx.one("task_get", id=ref)
    if row is not None and (user is None or row["owner"] == user):
        return task_from_row(row)
    if user is None:
        matches = tx.rows("task_ids_by_prefix", pattern=ref + "%")
    else:
        matches = tx.rows("task_ids_by_prefix_of_user", pattern=ref + "%", user=user)
    if not matches:
        raise NotFound(f"no task matches {ref!r}", task_id=ref)
    if len(matches) > 1:
        raise AmbiguousId(f"{ref!r} matches several tasks; give more characters")
    return load(tx, matches[0]["id"])


def with_attempts(tx: Tx, task: Task, position: int | None = None) -> Task:
    attempts = tuple(attempt_from_row(r) for r in tx.rows("attempts_of", task_id=task.id))
    return copy_task(task, attempts=attempts, position=position)


def ordered_queue(tx: Tx, now: float, aging: float | None) -> list[Task]:
    """Queued tasks in dispatch order (re-sorted in Python only when aging or fairness
    is on)."""
    tasks = [task_from_row(r) for r in tx.iter_rows("tasks_queued_in_order", page=500)]
    fairness = Fairness.from_setting(read_settings(tx)["fairness"])
    if fairness is not None:
        return policy.order(tasks, now, aging, fairness, fair.passes(tx, fairness))
    if aging:
        tasks = policy.order(tasks, now, aging)
    return tasks


def reordered(settings: Settings) -> bool:
    """Whether the line's order is not the stored one (aging or fairness is on), so
    that positions need the whole line rather than a count through the index."""
    return bool(settings["aging_interval"] or settings["fairness"])


def count_of(tx: Tx, name: str, **params: Any) -> int:
    row = tx.one(name, **params)
    return int(row["n"]) if row else 0


def next_rank(tx: Tx) -> str:
    """A rank after every rank given so far: the tail of the queue."""
    row = tx.one("counter_next", name="rank")
    assert row is not None
    return seq_rank(int(row["value"]))


def next_ranks(tx: Tx, n: int) -> list[str]:
    """`n` ranks after every rank given so far, in order, taken with one statement."""
    if n <= 0:
        return []
    row = tx.one("counter_add", name="rank", n=n)
    assert row is not None
    last = int(row["value"])
    return [seq_rank(value) for value in range(last - n + 1, last + 1)]


def free_rank(tx: Tx, lo: str | None, hi: str) -> str:
    """A rank strictly between `lo` and `hi` that no queued, held or running task has.

    Held and running tasks come back to the line with their rank (release, retry), so a
    new rank must differ from theirs too, or two tasks would tie.
    """
    rank = between(lo, hi)
    while tx.one("rank_taken", rank=rank) is not None:
        rank = between(rank, hi)
    return rank
