"""Idempotency keys, inside the caller's transaction: which specs of a submit name a task
that already exists, and the check that a restart does not make a key's second live task.

A key belongs to the task's owner (`user`); tasks without one share the no-owner scope,
so one user's key never names another user's task. While a task of owner O with key K
has not finished (waiting, queued, held, running or blocked), a submit of O with key K
returns it instead of creating one; with `dedup_window`, so does the last task of O's K
that finished within the window. Writes are serialized on both backends,
so the look-up and the insert cannot interleave; the partial unique index `tasks_key_live`
(migration 0014) makes a second live task of a key impossible all the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from slotline.errors import InvalidTransition
from slotline.models import Task, copy_task
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.rows import task_from_row

if TYPE_CHECKING:
    from slotline.spec import TaskSpec

# For each spec of a batch: the task it names (it exists), the index among the batch's
# new tasks of an earlier spec with the same key, or None (create it).
Found = Task | int | None


def existing(
    tx: Tx, specs: Sequence[TaskSpec], now: float, within: str | None = None
) -> list[Found]:
    """What each spec's key names, in order; an existing task is logged as deduplicated.

    Raises:
        InvalidTransition: `within` is given and a key names a task outside its subtree
            (a task token's submit: the owner's key, held by a task the token cannot see).
    """
    visible = None if within is None else {r["id"] for r in tx.rows("tasks_subtree", id=within)}
    found: list[Found] = []
    by_key: dict[tuple[str, str], Found] = {}
    fresh = 0
    for spec in specs:
        key = spec.key
        if key is None:
            found.append(None)
            fresh += 1
            continue
        scoped = (_owner(spec.user), key)
        if scoped in by_key:
            found.append(by_key[scoped])
            continue
        task = _named(tx, scoped, spec.dedup_window, now)
        if task is None:
            by_key[scoped] = fresh
            found.append(None)
            fresh += 1
        else:
            if visible is not None and task.id not in visible:
                raise InvalidTransition(
                    f"key {key!r} is in use by a task outside the subtree of task "
                    f"{within[:8] if within else ''}; use another key",
                    key=key,
                )
            task = copy_task(task, deduplicated=True)
            by_key[scoped] = task
            found.append(task)
            emit(tx, "deduplicated", task.id, now, key=key, status=task.status.value)
    return found


def _owner(user: str | None) -> str:
    """A key's scope, as the index `tasks_key_live` has it: '' for tasks without owner."""
    return user or ""


def _named(tx: Tx, scoped: tuple[str, str], window: float | None, now: float) -> Task | None:
    owner, key = scoped
    row = tx.one("task_by_live_key", owner=owner, key=key)
    if row is None and window is not None:
        row = tx.one("task_by_key_finished_since", owner=owner, key=key, since=now - window)
    return None if row is None else task_from_row(row)


def merge(found: Sequence[Found], created: Sequence[Task]) -> list[Task]:
    """The batch's answer in the order of its specs: existing tasks where found, the new
    ones (in order) elsewhere; a repeated key within the batch gets the first one's task,
    marked deduplicated."""
    result: list[Task] = []
    new = iter(created)
    for item in found:
        if item is None:
            result.append(next(new))
        elif isinstance(item, int):
            result.append(copy_task(created[item], deduplicated=True))
        else:
            result.append(item)
    return result


def check_restart(tx: Tx, task: Task) -> None:
    """Refuse to bring `task` back to the line while another task holds its key.

    Raises:
        InvalidTransition: another unfinished task of the same owner has the same key.
    """
    if task.key is None:
        return
    other = tx.one("task_key_taken", owner=_owner(task.user), key=task.key, id=task.id)
    if other is not None:
        raise InvalidTransition(
            f"cannot restart task {task.id[:8]}: task {other['id'][:8]} has its key "
            f"{task.key!r} and has not finished; cancel that one first",
            task_id=task.id,
            status=task.status,
        )
