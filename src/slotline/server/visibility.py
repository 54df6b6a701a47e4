"""What a caller may see of what is not one task: the event log and the per-value entries
of limits, rates, budgets and fairness.

Admins and viewers see everything. A user sees the events of their own tasks, and of
the rest what names no other user: no schedule whose task is someone else's (as
`GET /api/schedules/NAME` answers 404 for it), no limit, rate or budget keyed by
another user (`user=ann`), no fairness weight of another user, no other user's task
named in a queue-wide event. A task token sees its subtree, and what its task's user
would see of the rest, schedules aside (they are a user's, not a run's). Queue-wide
totals (counts of every user's tasks, the charts' samples, /metrics) are theirs only
when an admin shares them (`share_totals: true` in slotline.yaml).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from slotline.errors import NotFound
from slotline.models import Event
from slotline.server.auth import Principal
from slotline.server.context import ServerState

# Why a user (a task token) gets no queue-wide totals, and how an admin shares them.
TOTALS_WITHHELD = (
    "queue-wide totals (every user's tasks) are for admin and viewer tokens; an admin "
    "shares them with users by setting `share_totals: true` in slotline.yaml"
)


def sees_totals(state: ServerState, who: Principal) -> bool:
    """Whether `who` reads queue-wide totals: admins and viewers, and users and task
    tokens when slotline.yaml says `share_totals: true`."""
    return who.sees_all or state.config.share_totals


def own_user(who: Principal) -> str | None:
    """The user whose entries `who` sees: a user's own name, a task token's task's user."""
    if who.role == "user":
        return who.name
    return who.owner if who.role == "task" else None


def names_other_user(who: Principal, key: object, value: object) -> bool:
    """Whether a `key`/`value` entry (a limit, rate, budget…) is another user's to see."""
    return not who.sees_all and key == "user" and value is not None and value != own_user(who)


def own_entries(who: Principal, entries: Iterable[Mapping[str, Any]]) -> list[Any]:
    """`entries` ({key, value, …}) without those naming another user."""
    return [e for e in entries if not names_other_user(who, e.get("key"), e.get("value"))]


def own_fairness(who: Principal, fairness: Mapping[str, Any] | None) -> Any:
    """A fairness setting without the weights of other users (when its key is `user`)."""
    if not fairness or who.sees_all or fairness.get("key") != "user":
        return fairness
    weights = fairness.get("weights") or {}
    mine = {k: w for k, w in weights.items() if not names_other_user(who, "user", k)}
    return {**fairness, "weights": mine}


def own_settings(who: Principal, data: dict[str, Any]) -> dict[str, Any]:
    """Settings or a configuration as JSON (`limits`, `rates`, `budgets`, `fairness`,
    `schedules` by name), without what names another user: entries keyed by their name,
    their fairness weights, the schedules whose task is not the caller's own."""
    if who.sees_all:
        return data
    shown = dict(data)
    for name in ("limits", "rates", "budgets"):
        if name in shown:
            shown[name] = own_entries(who, shown[name])
    if "fairness" in shown:
        shown["fairness"] = own_fairness(who, shown["fairness"])
    if "schedules" in shown:
        shown["schedules"] = {
            name: schedule
            for name, schedule in shown["schedules"].items()
            if who.role == "user" and (schedule.get("task") or {}).get("user") == who.name
        }
    return shown


class Visibility:
    """An event as a principal may see it, or None: users only those of their own tasks,
    a task token those of its subtree (which grows as subtasks are submitted); of the
    queue-wide ones, what names no other user (see the module)."""

    def __init__(self, state: ServerState, who: Principal) -> None:
        self.state = state
        self.who = who
        self.owned: dict[str, bool] = dict.fromkeys(who.subtree, True)

    async def __call__(self, event: Event) -> Event | None:
        if self.who.sees_all:
            return event
        if event.task_id is None:
            return await self._queue_wide(event)
        return event if await self._sees(event.task_id) else None

    async def _sees(self, task_id: str) -> bool:
        known = self.owned.get(task_id)
        if known is None:
            try:
                task = await self.state.call(self.state.store.get, task_id)
                if self.who.role == "task":  # a parent is always seen before its child
                    known = task.parent_id is not None and self.owned.get(task.parent_id, False)
                else:
                    known = self.who.sees(task)
            except NotFound:
                known = False
            if len(self.owned) > 10_000:
                self.owned.clear()
            self.owned[task_id] = known
        return known

    async def _queue_wide(self, event: Event) -> Event | None:
        data, who = event.data, self.who
        if event.kind.startswith("schedule_"):  # its `user`: whom its task runs as
            mine = who.role == "user" and data.get("user") == who.name
            return event if mine else None
        if names_other_user(who, data.get("key"), data.get("value")):
            return None
        if "fairness" in data:
            return replace(event, data={**data, "fairness": own_fairness(who, data["fairness"])})
        last = data.get("last_task")  # `drained`: the run that ended last
        if isinstance(last, str) and not await self._sees(last):
            return replace(event, data={**data, "last_task": None})
        return event
