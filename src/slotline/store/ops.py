"""Steps shared by the store's verbs, each run inside the caller's transaction."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from slotline.bounds import parse_id
from slotline.errors import AmbiguousId, NotFound
from slotline.models import Limit, Status, Task
from slotline.scheduler import policy
from slotline.scheduler.ranks import between, seq_rank
from slotline.store.queries import Tx
from slotline.store.rows import attempt_from_row, dumps, task_from_row

# How long a node's attempts stay its own without a heartbeat; another node of the store
# reaps them after that (a setting: `serve --lease`, `lease:` in slotline.yaml).
LEASE_SECONDS = 30.0

DEFAULT_SETTINGS: dict[str, Any] = {
    "max_concurrent": 3,
    "paused": False,
    "exempt_agents": [],
    "aging_interval": None,
    "max_depth": 5,
    "max_children": 100,
    "max_queue_size": 10_000,
    "max_queued_per_user": None,
    "retry_backoff_max": 3600.0,
}


@dataclass(frozen=True, slots=True)
class Settings:
    """Store-wide settings and limits, as persisted."""

    values: dict[str, Any]
    per_key: tuple[Limit, ...]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def limits(self) -> policy.Limits:
        return policy.Limits(
            max_concurrent=int(self.values["max_concurrent"]),
            per_key=self.per_key,
            exempt_agents=frozenset(self.values["exempt_agents"]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.values,
            "limits": [
                {"key": lim.key, "value": lim.value, "max": lim.max} for lim in self.per_key
            ],
        }


def emit(tx: Tx, kind: str, task_id: str | None, at: float, **data: Any) -> int:
    """Append an event; returns its seq."""
    row = tx.one("event_insert", at=at, kind=kind, task_id=task_id, data=dumps(data))
    assert row is not None
    return int(row["seq"])


def change(tx: Tx, task: Task, kind: str, to: Status, now: float, **data: Any) -> None:
    """Emit the event of a status change the caller has written."""
    emit(tx, kind, task.id, now, **{"from": task.status.value, "to": to.value, **data})


def next_rank(tx: Tx) -> str:
    """A rank after every rank given so far: the tail of the queue."""
    row = tx.one("counter_next", name="rank")
    assert row is not None
    return seq_rank(int(row["value"]))


def free_rank(tx: Tx, lo: str | None, hi: str) -> str:
    """A rank strictly between `lo` and `hi` that no queued, held or running task has.

    Held and running tasks come back to the line with their rank (release, retry), so a
    new rank must differ from theirs too, or two tasks would tie.
    """
    rank = between(lo, hi)
    while tx.one("rank_taken", rank=rank) is not None:
        rank = between(rank, hi)
    return rank


def read_settings(tx: Tx) -> Settings:
    values = dict(DEFAULT_SETTINGS)
    for row in tx.rows("settings_all"):
        values[row["name"]] = json.loads(row["value"])
    per_key = tuple(
        Limit(row["key"], row["value"] or None, int(row["max_running"]))
        for row in tx.rows("limits_all")
    )
    return Settings(values, per_key)


def write_setting(tx: Tx, name: str, value: Any) -> None:
    tx.run("setting_delete", name=name)
    tx.run("setting_insert", name=name, value=dumps(value))


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
    return replace(task, attempts=attempts, position=position)


def ordered_queue(tx: Tx, now: float, aging: float | None) -> list[Task]:
    """Queued tasks in dispatch order (re-sorted in Python only when aging is on)."""
    tasks = [task_from_row(r) for r in tx.iter_rows("tasks_queued_in_order", page=500)]
    if aging:
        tasks = policy.order(tasks, now, aging)
    return tasks


def count(tx: Tx, name: str, **params: Any) -> int:
    row = tx.one(name, **params)
    return int(row["n"]) if row else 0
