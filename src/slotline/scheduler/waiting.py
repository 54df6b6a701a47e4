"""Why a task in line does not start now: the reasons of the ETA simulation's line, as
dispatch would decide them (`policy.plan`'s walk), with what holds starts outside it (a
hold, a dependency, no live node, a function no node serves, the resource guard)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from slotline.line import unserved_reason
from slotline.models import WaitingReason
from slotline.scheduler import policy

if TYPE_CHECKING:  # the line is the simulation's (eta.py calls this at its first instant)
    from slotline.scheduler.lineup import Line


def reasons(line: Line, limits: policy.Limits) -> dict[str, WaitingReason]:
    """Why each task in `line` does not start now, by id (a task that would start has
    none): held, waiting on a dependency, no live node (or none serving its function),
    the resource guard holding
    starts, or what `policy.plan`'s walk says under `limits` (the limits in force now)."""
    why: dict[str, WaitingReason] = {}
    held = WaitingReason("held", "held: `slotline release` lets it start")
    why.update((t.id, held) for t in line.held)
    states = {t.id: t.status for t in (*line.running, *line.queued, *line.waiting, *line.held)}
    for task in line.waiting:
        deps = [d for d in task.depends_on if d in states]
        if deps:
            more = f" and {len(deps) - 1} more" if len(deps) > 1 else ""
            text = f"waits for task {deps[0][:8]} ({states[deps[0]]}){more}"
            why[task.id] = WaitingReason("dependency", text)
    queued = [t for t in line.queued if not t.start_now]  # in store order, as `plan` reads
    snapshot = policy.Snapshot(
        running=line.running, queued=queued, limits=limits, now=line.now,
        start_now=[t for t in line.queued if t.start_now], paused=line.paused,
        aging_interval=line.aging_interval, rates=line.rates, holds=line.holds,
        fairness=line.fairness, passes=line.passes, budgets=line.budgets,
    )  # fmt: skip
    policy.plan(snapshot, runnable=lambda t: not line.unserved(t), why=why)
    why.update(
        (t.id, WaitingReason("unserved", unserved_reason(t.callable or "")))
        for t in (*line.queued, *line.waiting)
        if line.unserved(t) and t.id not in why
    )
    # What holds every start comes before a free or full slot, not before a task's own
    # reason (its start time, a limit…), which still holds once the line moves.
    if not line.served:
        text = "no live node serves this store: start one with `slotline serve`"
        held_by: WaitingReason | None = WaitingReason("no_node", text)
    elif line.admission is not None and line.admission.held and not line.paused:
        held_by = WaitingReason("guard", "the resource guard holds new starts (CPU or memory)")
    else:
        held_by = None
    if held_by is not None:
        for task in queued:
            found = why.get(task.id)
            if (found is None or found.kind == "slots") and task.kind != "external":
                why[task.id] = held_by
    return why
