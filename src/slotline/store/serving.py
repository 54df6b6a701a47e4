"""What nodes serve, on the store's side: the configuration each live node published
(its agent types, the settings it applied, the file it read), the Python function names
it runs, and the results functions return (kept with their task)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from slotline.bounds import MAX_RESULT_BYTES
from slotline.clock import iso
from slotline.errors import InvalidInput, NotFound, StaleAttempt
from slotline.line import unserved_reason
from slotline.models import Kind, Status, Task, WaitingReason, copy_task
from slotline.store.core import StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.settings import LEASE_SECONDS
from slotline.store.tasks import load
from slotline.tasktoken import same_token


@dataclass(frozen=True)
class PublishedConfig:
    """What a node published of the configuration it serves (`ServingVerbs.publish_config`):
    its agent types ({name: type as slotline.yaml gives it}), the settings it applied, the
    file it read them from (None: no file, the defaults), and when (store clock)."""

    node_id: str
    source: str | None
    agents: dict[str, dict[str, Any]]
    settings: dict[str, Any]
    published_at: float

    def to_dict(self) -> dict[str, Any]:
        """As `slotline config --json` shows it (the agent types and settings aside)."""
        return {"node": self.node_id, "source": self.source, "published_at": iso(self.published_at)}


class ServingVerbs(StoreCore):
    """What nodes say they serve, and what function runs return."""

    def publish_config(
        self,
        node_id: str,
        source: str | None,
        agents: Mapping[str, Mapping[str, Any]],
        settings: Mapping[str, Any],
    ) -> PublishedConfig:
        """Record what node `node_id` serves, replacing what it published before: clients
        on the store build tasks of these agent types as the node would (the caller
        leaves secrets out: environment variable names only, no store password, no
        webhooks)."""
        with self._write() as tx:
            now = tx.now()
            tx.run(
                "node_config_put",
                node_id=node_id,
                source=source,
                agents=json.dumps(agents, sort_keys=True),
                settings=json.dumps(settings, sort_keys=True),
                now=now,
            )
            names = sorted(agents)
            emit(tx, "config_published", None, now, node=node_id, source=source, agents=names)
        return PublishedConfig(node_id, source, _objects(agents), dict(settings), now)

    def published_configs(self) -> list[PublishedConfig]:
        """What the live nodes (a heartbeat within a lease) published, the latest first."""
        with self._transaction(write=False) as tx:
            rows = tx.rows("node_configs_live", since=tx.now() - LEASE_SECONDS)
        return [
            PublishedConfig(
                node_id=str(row["node_id"]),
                source=row["source"],
                agents=json.loads(row["agents"]),
                settings=json.loads(row["settings"]),
                published_at=float(row["published_at"]),
            )
            for row in rows
        ]

    def serve_functions(self, node_id: str, names: Iterable[str]) -> None:
        """Record the function names node `node_id` runs (replacing what it said before)."""
        served = sorted(set(names))
        with self._write() as tx:
            tx.run("node_functions_delete", node_id=node_id)
            for name in served:
                tx.run("node_function_insert", node_id=node_id, name=name)
            emit(tx, "functions_served", None, tx.now(), node=node_id, names=len(served))

    def served_functions(self) -> frozenset[str]:
        """The function names some live node serves (it heartbeated within a lease)."""
        with self._transaction(write=False) as tx:
            return served_names(tx)

    def put_result(self, attempt_id: str, token: str, value: str) -> None:
        """Keep the JSON `value` a function's attempt returned, before its end is reported:
        it becomes the task's `result` if that attempt succeeds.

        Raises:
            InvalidInput: `value` is not JSON, or is larger than MAX_RESULT_BYTES.
            StaleAttempt: the attempt is not the task's live one, or the token is wrong.
        """
        size = len(value.encode())
        if size > MAX_RESULT_BYTES:
            raise InvalidInput(
                f"the result is {size} bytes of JSON; at most {MAX_RESULT_BYTES} are kept"
            )
        try:
            json.loads(value)
        except ValueError as exc:
            raise InvalidInput(f"the result is not JSON: {exc}") from None
        with self._write() as tx:
            row = tx.one("attempt_get", id=attempt_id)
            if row is None:
                raise NotFound(f"no attempt {attempt_id[:80]}", attempt_id=attempt_id[:80])
            task = load(tx, row["task_id"])
            live = row["finished_at"] is None and task.current_attempt == attempt_id
            if not (same_token(row["token"], token) and live):
                raise StaleAttempt(f"attempt {attempt_id[:8]} may no longer report a result")
            tx.run("result_put", task_id=task.id, attempt_id=attempt_id, value=value, now=tx.now())
            tx.notify = False  # nothing shows it until the attempt's end is committed


def _objects(agents: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: dict(agent) for name, agent in agents.items()}


def served_names(tx: Tx) -> frozenset[str]:
    """The names of the functions some live node serves."""
    rows = tx.rows("functions_served", since=tx.now() - LEASE_SECONDS)
    return frozenset(str(r["name"]) for r in rows)


def annotate(tx: Tx, tasks: list[Task]) -> list[Task]:
    """Tasks as reads show them: a succeeded function task with its `result`, and a queued
    one whose name no live node serves with that as its `status_reason` (and its
    `waiting_reason`, of kind `unserved`)."""
    waiting = [t for t in tasks if t.kind is Kind.CALLABLE and t.status is Status.QUEUED]
    served = served_names(tx) if waiting else frozenset()
    return [_shown(tx, task, served) for task in tasks]


def _shown(tx: Tx, task: Task, served: frozenset[str]) -> Task:
    if task.kind is not Kind.CALLABLE:
        return task
    if task.status is Status.QUEUED and task.callable not in served:
        reason = unserved_reason(task.callable or "")
        return copy_task(
            task, status_reason=reason, waiting_reason=WaitingReason("unserved", reason)
        )
    if task.status is Status.SUCCEEDED:
        return copy_task(task, result=_result(tx, task))
    return task


def _result(tx: Tx, task: Task) -> Any:
    row = tx.one("result_of_attempt", task_id=task.id, attempt_id=task.current_attempt)
    return None if row is None else json.loads(row["value"])
