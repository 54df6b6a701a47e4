"""Recurring schedules in the store: add, list, pause, resume, remove, and the firing of
due ticks, each one transaction.

A tick is claimed by moving the schedule's `next_at` on with a compare-and-set, in the
transaction that submits its task; writes are serialized on both backends (SQLite's
`BEGIN IMMEDIATE`, PostgreSQL's advisory lock), so however many nodes fire at once, each
tick submits at most one task. Ticks missed while no node ran are not made up for: the
schedule fires once, and its next tick is the first one after now.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slotline.clock import iso
from slotline.errors import InvalidInput, NotFound, SlotlineError, StoreError
from slotline.models import Task
from slotline.scheduler import cron
from slotline.scheduler.cron import Schedule
from slotline.store.core import Serial, StoreCore
from slotline.store.events import emit
from slotline.store.queries import Tx
from slotline.store.rows import dumps, task_from_row
from slotline.store.steps import cancel_task
from slotline.store.submit import create_tasks

# Task fields a schedule's task may not have: each tick makes a new task, now.
_NOT_FOR_SCHEDULES = ("key", "dedup_window", "run_at", "delay", "depends_on", "parent_id")


@dataclass(frozen=True, slots=True)
class Fired:
    """One tick a node fired: the task it submitted (None: skipped or refused, `reason`)."""

    name: str
    tick: float
    task: Task | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class FireResult:
    fired: list[Fired] = field(default_factory=list)
    # The next tick of any schedule that is not paused (store clock), or None.
    next_at: float | None = None


def check_schedule_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A schedule's task, checked as a submit would check it, as the JSON the store keeps.
    A worktree task's repository is checked here (git runs: call it outside a
    transaction) and kept as its top-level folder; its base is not pinned, each task
    starts from its base as it is when its first attempt starts.

    Raises:
        InvalidInput: a field is wrong, or one that a recurring task cannot have, or a
            worktree task's repository or base is (the message says which).
    """
    from slotline.spec import parse_spec
    from slotline.worktrees.pinning import locate

    for name in _NOT_FOR_SCHEDULES:
        if spec.get(name):
            raise InvalidInput(
                f"{name}: a schedule's task cannot have one (each tick submits a new task)"
            )
    parsed = locate(parse_spec(dict(spec)))
    data: dict[str, Any] = parsed.model_dump(mode="json", exclude_defaults=True)
    data["priority"] = parsed.priority.label
    return data


def schedule_from_row(row: Mapping[str, Any], live: tuple[str, ...] = ()) -> Schedule:
    return Schedule(
        name=row["name"],
        cron=row["cron"],
        tz=row["tz"],
        overlap=cron.check_overlap(row["overlap"]),
        spec=json.loads(row["spec"]),
        paused=bool(row["paused"]),
        origin=row["origin"],
        next_at=float(row["next_at"]),
        last_at=None if row["last_at"] is None else float(row["last_at"]),
        last_task_id=row["last_task_id"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        live=live,
    )


class ScheduleVerbs(StoreCore):
    """Recurring schedules: the verbs people use, and `fire_schedules` that nodes call."""

    def add_schedule(
        self,
        name: str,
        cron_expr: str,
        spec: Mapping[str, Any],
        *,
        tz: str = "UTC",
        overlap: str = "skip",
        paused: bool = False,
        replace_existing: bool = False,
        origin: str = "api",
        now: float | None = None,
    ) -> Schedule:
        """Create a schedule (or, with `replace_existing`, change the one of that name).

        Raises:
            InvalidInput: a bad name, cron expression, time zone, overlap or task, or the
                name is taken (without `replace_existing`).
        """
        values = _checked(name, cron_expr, spec, tz, overlap)
        with self._write() as tx:
            now = tx.now() if now is None else now
            row = tx.one("schedule_get", name=name)
            if row is not None and not replace_existing:
                raise InvalidInput(
                    f"schedule {name!r} exists; remove it first, or replace it (--replace)"
                )
            return _put(tx, values, row, paused, origin, now)

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name, with the tasks of each that have not ended."""
        with self._transaction(write=False) as tx:
            return [_with_live(tx, row) for row in tx.rows("schedules_all")]

    def schedule(self, name: str) -> Schedule:
        """One schedule by name.

        Raises:
            NotFound: no schedule has that name.
        """
        with self._transaction(write=False) as tx:
            return _with_live(tx, _get(tx, name))

    def pause_schedule(self, name: str, now: float | None = None) -> Schedule:
        """Stop submitting at its ticks (a task it submitted goes on).

        Raises:
            NotFound: no schedule has that name.
        """
        return self._set_paused(name, True, now)

    def resume_schedule(self, name: str, now: float | None = None) -> Schedule:
        """Submit again from the next tick after now (ticks while paused are not made up).

        Raises:
            NotFound: no schedule has that name.
        """
        return self._set_paused(name, False, now)

    def _set_paused(self, name: str, paused: bool, now: float | None) -> Schedule:
        with self._write() as tx:
            now = tx.now() if now is None else now
            current = schedule_from_row(_get(tx, name))
            if current.paused == paused:
                tx.notify = False
                return _with_live(tx, _get(tx, name))
            next_at = current.next_at if paused else cron.next_tick(current.cron, current.tz, now)
            tx.run("schedule_set_paused", name=name, paused=paused, next_at=next_at, now=now)
            kind = "schedule_paused" if paused else "schedule_resumed"
            next_iso = None if paused else iso(next_at)
            emit(tx, kind, None, now, name=name, next_at=next_iso, user=_user(current))
            return _with_live(tx, _get(tx, name))

    def remove_schedule(self, name: str, now: float | None = None) -> Schedule:
        """Delete a schedule; the tasks it submitted stay as they are.

        Raises:
            NotFound: no schedule has that name.
        """
        with self._write() as tx:
            now = tx.now() if now is None else now
            removed = _with_live(tx, _get(tx, name))
            tx.run("schedule_delete", name=name)
            emit(tx, "schedule_removed", None, now, name=name, user=_user(removed))
            return removed

    def sync_schedules(
        self, declared: Sequence[Mapping[str, Any]], now: float | None = None
    ) -> list[str]:
        """Make the schedules of slotline.yaml (`origin` config) what `declared` says:
        create or change each, remove those no longer declared. A declared schedule keeps
        the paused state a person gave it. Returns the names created, changed or removed.

        Raises:
            InvalidInput: a declared schedule is wrong (nothing is changed).
        """
        checked = []
        for d in declared:
            try:
                values = _checked(d["name"], d["cron"], d["task"], d.get("tz", "UTC"), d["overlap"])
            except InvalidInput as exc:
                raise InvalidInput(f"schedule {d['name']!r}: {exc}") from None
            checked.append((values, bool(d.get("paused", False))))
        names = {values["name"] for values, _ in checked}
        changed: list[str] = []
        with self._write() as tx:
            now = tx.now() if now is None else now
            for values, declared_paused in checked:
                row = tx.one("schedule_get", name=values["name"])
                paused = declared_paused
                if row is not None:
                    paused = bool(row["paused"])
                    same = all(row[k] == values[k] for k in ("cron", "tz", "overlap", "spec"))
                    if same and row["origin"] == "config":
                        continue
                _put(tx, values, row, paused, "config", now)
                changed.append(values["name"])
            for row in tx.rows("schedules_all"):
                if row["origin"] == "config" and row["name"] not in names:
                    tx.run("schedule_delete", name=row["name"])
                    user = _user(schedule_from_row(row))
                    emit(
                        tx, "schedule_removed", None, now, name=row["name"], origin="config",
                        user=user,
                    )  # fmt: skip
                    changed.append(row["name"])
            tx.notify = bool(changed)
        return changed

    def next_schedule_at(self) -> float | None:
        """The next tick of any schedule that is not paused, on the store's clock."""
        with self._transaction(write=False) as tx:
            return _next_at(tx)

    def fire_schedules(self, now: float | None = None) -> FireResult:
        """Submit the task of every due tick, each exactly once across nodes, as its
        schedule's overlap policy says; move each schedule on to its next tick after now.

        A tick whose task a bound refuses (a full queue) or whose task is no longer valid
        is logged (`schedule_failed`) and not retried: the schedule goes on.
        """
        # Serialized with submits too (it creates tasks: the queue bounds stay exact).
        with self._write(Serial.BOTH) as tx:
            now = tx.now() if now is None else now
            due = [schedule_from_row(row) for row in tx.rows("schedules_due", now=now)]
            fired = [f for f in (_fire(tx, s, now) for s in due) if f is not None]
            tx.notify = bool(fired)
            return FireResult(fired, _next_at(tx))


def _checked(
    name: str, cron_expr: str, spec: Mapping[str, Any], tz: str, overlap: str
) -> dict[str, Any]:
    """A schedule's columns, each checked.

    Raises:
        InvalidInput: naming the bad one.
    """
    cron.zone(tz)
    return {
        "name": cron.check_name(name),
        "cron": cron.check_cron(cron_expr, tz),
        "tz": tz,
        "overlap": cron.check_overlap(overlap),
        "spec": dumps(check_schedule_spec(spec)),
    }


def _put(
    tx: Tx,
    values: dict[str, Any],
    row: Mapping[str, Any] | None,
    paused: bool,
    origin: str,
    now: float,
) -> Schedule:
    """Insert or update a schedule; its next tick is kept unless its timing changed."""
    next_at = cron.next_tick(values["cron"], values["tz"], now)
    if row is None:
        tx.run("schedule_insert", **values, paused=paused, origin=origin, next_at=next_at, now=now)
        kind = "schedule_added"
    else:
        if (row["cron"], row["tz"]) == (values["cron"], values["tz"]):
            next_at = float(row["next_at"])
        tx.run("schedule_update", **values, paused=paused, origin=origin, next_at=next_at, now=now)
        kind = "schedule_changed"
    schedule = _with_live(tx, _get(tx, values["name"]))
    data = {"cron": values["cron"], "tz": values["tz"], "overlap": values["overlap"]}
    data.update(origin=origin, next_at=iso(next_at), user=_user(schedule))
    emit(tx, kind, None, now, name=values["name"], **data)
    return schedule


def _fire(tx: Tx, schedule: Schedule, now: float) -> Fired | None:
    """One due tick: claimed by a compare-and-set on `next_at`, then decided and done."""
    name, tick = schedule.name, schedule.next_at
    try:
        following = cron.next_tick(schedule.cron, schedule.tz, now)
    except InvalidInput as exc:  # a zone the machine no longer knows: pause, say why
        tx.run("schedule_set_paused", name=name, paused=True, next_at=tick, now=now)
        emit(tx, "schedule_failed", None, now, **_about(schedule, tick), reason=str(exc))
        return Fired(name, tick, None, str(exc))
    if tx.one("schedule_advance", name=name, next_at=following, tick=tick) is None:
        return None  # another writer took this tick
    live = [task_from_row(r) for r in tx.rows("tasks_live_of_schedule", schedule=name)]
    decision = cron.decide(schedule.overlap, live)
    late = round(max(0.0, now - tick), 3)
    if not decision.submit:
        emit(tx, "schedule_skipped", None, now, **_about(schedule, tick), reason=decision.reason)
        return Fired(name, tick, None, decision.reason)
    from slotline.spec import parse_spec

    try:
        with tx.part():
            for task in live:
                if task.id in decision.cancel:
                    cancel_task(tx, task, now)
            (task,) = create_tasks(tx, [parse_spec(schedule.spec)], now, schedule=name)
    except StoreError:
        raise
    except SlotlineError as exc:
        emit(tx, "schedule_failed", None, now, **_about(schedule, tick), reason=str(exc))
        return Fired(name, tick, None, str(exc))
    tx.run("schedule_set_last_task", name=name, task_id=task.id)
    replaced = list(decision.cancel)
    emit(
        tx, "schedule_fired", task.id, now, name=name, tick=iso(tick), late=late, replaced=replaced
    )
    return Fired(name, tick, task)


def _user(schedule: Schedule) -> str | None:
    """Whom a schedule's task runs as: named in its events, which only that user (and
    admins, viewers) may see."""
    user = schedule.spec.get("user")
    return None if user is None else str(user)


def _about(schedule: Schedule, tick: float) -> dict[str, Any]:
    """What an event on one tick of `schedule` says of it."""
    return {"name": schedule.name, "tick": iso(tick), "user": _user(schedule)}


def _get(tx: Tx, name: str) -> dict[str, Any]:
    row = tx.one("schedule_get", name=name)
    if row is None:
        raise NotFound(f"no schedule named {name!r} (see `slotline schedule ls`)", name=name)
    return row


def _with_live(tx: Tx, row: Mapping[str, Any]) -> Schedule:
    live = tuple(r["id"] for r in tx.rows("tasks_live_of_schedule", schedule=row["name"]))
    return schedule_from_row(row, live)


def _next_at(tx: Tx) -> float | None:
    at = (tx.one("schedules_next_at") or {}).get("at")
    return None if at is None else float(at)
