"""How the CLI shows things to people: rich tables and lines (plain text and JSON are in
`cli/plain.py`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from rich import box
from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from slotline.cli.pacing import limits_lines, status_lines
from slotline.cli.plain import (
    NEXT_UP,
    ago,
    duration,
    ends_text,
    eta_text,
    printable,
    short_ids,
    until,
    why_text,
)
from slotline.limits import Limit
from slotline.line import NO_SLOTS
from slotline.models import Kind, Status, Task

if TYPE_CHECKING:
    from slotline.store import QueueStatus, Settings

STATUS_STYLES: dict[Status, str] = {
    Status.WAITING: "cyan",
    Status.QUEUED: "blue",
    Status.HELD: "magenta",
    Status.RUNNING: "bold yellow",
    Status.SUCCEEDED: "green",
    Status.FAILED: "bold red",
    Status.CANCELLED: "dim",
    Status.EXPIRED: "dim",
    Status.BLOCKED: "red",
}


@functools.cache
def console() -> Console:
    return Console(highlight=False, emoji=False)


def show(*renderables: RenderableType) -> None:
    console().print(*renderables)


def text(value: str | None, style: str = "") -> Text:
    """Task text (title, label, agent…) as a rich Text, escaped by `printable`."""
    return Text(printable(value or "-"), style=style)


def keep_widths(table: Table) -> Table:
    """Columns without a ratio (ids, states, numbers) keep their full width when the
    terminal is narrow; only the ratio columns (titles) shrink. Call after adding rows.

    Rich shares the width by ratio only in an expanded table; otherwise a long title
    makes it shrink every column evenly, down to nothing."""
    table.expand = any(column.ratio for column in table.columns)
    for column in table.columns:
        if column.ratio:
            continue
        widths = [_width(column.header), *(_width(cell) for cell in column.cells)]
        column.min_width = min(max(widths), column.max_width or 10**6)
    return table


def _width(cell: object) -> int:
    if isinstance(cell, Text):
        return cell.cell_len
    return cell_len(cell) if isinstance(cell, str) else 0


def status_text(status: Status) -> Text:
    return Text(status.value, style=STATUS_STYLES.get(status, ""))


def task_state(task: Task) -> Text:
    """The status, with the NEEDS INPUT badge of an interactive run that waits on its
    terminal, and the STALLED one of a run that went quiet (or printed its prompt)."""
    state = status_text(task.status)
    if task.status is Status.RUNNING:
        state.append(run_marks(task), style="bold yellow")
    return state


def run_marks(task: Task) -> str:
    """` NEEDS INPUT`, ` STALLED`, both or neither, after a running task's title or state
    (and that a run needing input gave its slot back: the limits do not count it)."""
    marks = " NEEDS INPUT" if task.needs_input_at is not None else ""
    marks += " (slot given back)" if task.slot_released is not None else ""
    return marks + (" STALLED" if task.stalled_at is not None else "")


def new_table(*columns: str, title: str | None = None) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD, title=title, title_justify="left", pad_edge=False, show_edge=False
    )
    for name in columns:
        table.add_column(name, no_wrap=True)
    return table


def _title_column(table: Table, name: str = "TITLE") -> None:
    table.add_column(name, no_wrap=True, overflow="ellipsis", ratio=1, min_width=12)


def task_table(tasks: Iterable[Task], now: float) -> Table:
    """`slotline ls`: short id, status, priority, position, title, agent, age."""
    table = new_table("ID", "STATUS", "PRI", "POS")
    _title_column(table)
    table.add_column("AGENT", no_wrap=True, overflow="ellipsis", max_width=16)
    table.add_column("AGE", no_wrap=True, justify="right")
    table.add_column("ETA", no_wrap=True, justify="right")
    table.add_column("WHY NOT NOW", no_wrap=True, overflow="ellipsis", ratio=1, min_width=11)
    tasks = list(tasks)
    ids = short_ids(t.id for t in tasks)
    for task in tasks:
        table.add_row(
            ids[task.id],
            task_state(task),
            _priority(task),
            "-" if task.position is None else str(task.position),
            text(task.title),
            text(task.agent),
            ago(task.created_at, now),
            eta_text(task, now),
            why_text(task),
        )
    return keep_widths(table)


def _priority(task: Task) -> Text:
    text = Text(task.priority.label)
    if task.boosted:
        text.append("+", style="bold")
    return text


def queue_status(
    status: QueueStatus, counts: Mapping[str, int], now: float, show_queued: int | None
) -> RenderableType:
    """`slotline status`: capacity, running tasks, and the line with NEXT UP."""
    parts: list[RenderableType] = [_capacity_line(status)]
    others = [
        f"{counts[s]} {s}"
        for s in (Status.WAITING, Status.HELD, Status.BLOCKED)
        if counts.get(s.value)
    ]
    if others:
        parts.append(Text("not in line: " + ", ".join(others), style="dim"))
    ids = short_ids(t.id for t in (*status.running, *status.queued))
    running = new_table("ID", title=f"RUNNING ({len(status.running)})")
    _title_column(running)
    for name in ("AGENT", "PID", "STARTED", "ETA END"):
        running.add_column(name, no_wrap=True)
    for task in status.running:
        attempt = task.attempts[-1] if task.attempts else None
        pid = attempt.pid if attempt is not None else None
        marker = " (over limit)" if attempt is not None and attempt.over_limit else ""
        marker += run_marks(task)
        running.add_row(
            ids[task.id],
            text(task.title + marker),
            text(task.agent),
            "-" if pid is None else str(pid),
            ago(task.started_at, now),
            ends_text(task, now),
        )
    parts.append(keep_widths(running) if status.running else Text("nothing running", style="dim"))
    total = len(status.queued) if status.queued_total is None else status.queued_total
    queued = new_table("POS", "", "ID", "PRI", title=f"QUEUED ({total})")
    _title_column(queued)
    queued.add_column("AGENT", no_wrap=True, overflow="ellipsis", max_width=16)
    queued.add_column("WAITED", no_wrap=True, justify="right")
    queued.add_column("ETA START", no_wrap=True, justify="right")
    queued.add_column("WHY NOT NOW", no_wrap=True, overflow="ellipsis", ratio=1, min_width=11)
    shown = status.queued if show_queued is None else status.queued[:show_queued]
    first = status.next_up
    for task in shown:
        queued.add_row(
            str(task.position),
            Text(NEXT_UP, style="bold green") if task.id == first else "",
            ids[task.id],
            _priority(task),
            text(task.title),
            text(task.agent),
            duration(now - (task.queued_at or task.created_at)),
            eta_text(task, now),
            why_text(task),
        )
    parts.append(keep_widths(queued) if status.queued else Text("nothing queued", style="dim"))
    for task in shown:  # a function no live node serves, or a budget: why it does not start
        held = task.budget_until is not None
        if (task.kind is Kind.CALLABLE or held) and task.status_reason:
            parts.append(Text(f"{ids[task.id]}: {printable(task.status_reason)}", style="yellow"))
    if len(shown) < total:
        more = total - len(shown)
        parts.append(Text(f"… and {more} more (slotline status --all)", style="dim"))
    parts.extend(status_lines(status, now))
    return Group(*parts)


def eta_cell(at: float | None, task: Task, now: float, end: bool) -> str | None:
    """An estimate in `show` (`end`: of the run's end, else of its start): rough, in
    local time and relative (`~14:05 (in ~5m)`), `past its estimate` for an overdue
    run's end, `unknown` when it could not be made."""
    if end and task.eta_overdue:
        return "past its estimate"
    if at is None:
        started = end or task.status is not Status.RUNNING
        live = task.status in (Status.QUEUED, Status.WAITING, Status.HELD, Status.RUNNING)
        return "unknown" if live and started and task.eta_unavailable is not None else None
    clock = datetime.fromtimestamp(at).strftime("%H:%M")
    return f"~{clock} ({until(at, now)})"


def _capacity_line(status: QueueStatus) -> Text:
    """Capacity in one coherent phrase: `NO SLOTS` (max_concurrent 0), `OVER LIMIT`
    (a started-now task runs past it), or `AT CAPACITY`; then PAUSED if it is."""
    line = Text()
    running = f"{status.active}/{status.max_concurrent} running"
    if status.capacity == "no_slots":
        line.append(running, style="bold")
        line.append(f" · NO SLOTS: {NO_SLOTS} (slotline limits --set max_concurrent=N)")
        line.stylize("bold red", len(running) + 3)
    elif status.capacity == "over_limit":
        line.append(f"OVER LIMIT: {running}", style="bold red")
        line.append(" (a started-now task runs past the limit)")
    else:
        line.append(running, style="bold")
        slots = status.slots_available
        line.append(f" · {slots} slot{'' if slots == 1 else 's'} available")
        if status.capacity == "full":
            line.append(" · AT CAPACITY", style="bold red")
    if status.paused:
        line.append(" · PAUSED (nothing new starts; slotline resume)", style="bold magenta")
    return line


def limits_table(settings: Settings) -> RenderableType:
    """`slotline limits`: the global cap, per-key caps, exempt agents and spawn bounds."""
    table = new_table()
    table.add_column("LIMIT", no_wrap=True, overflow="ellipsis", ratio=1, min_width=14)
    table.add_column("MAX", no_wrap=True, justify="right")
    table.add_column("MEANING", no_wrap=True, overflow="ellipsis", ratio=1, min_width=12)
    table.add_row("max_concurrent", str(settings["max_concurrent"]), "running tasks in all")
    for limit in sorted(settings.per_key, key=lambda lim: (lim.key, lim.value or "")):
        table.add_row(text(limit.name), str(limit.max), text(_limit_meaning(limit)))
    for name, meaning in (
        ("max_queue_size", "tasks waiting to start"),
        ("max_queued_per_user", "tasks waiting to start, of one user"),
        ("max_depth", "levels of subtasks"),
        ("max_children", "active subtasks of one task"),
    ):
        bound = settings[name]
        table.add_row(name, "none" if bound is None else str(bound), meaning)
    lines: list[RenderableType] = [keep_widths(table)]
    exempt = settings["exempt_agents"]
    if exempt:
        lines.append(Text("outside the global pool: " + ", ".join(exempt)))
    if settings["aging_interval"]:
        lines.append(Text(f"aging: one priority level per {settings['aging_interval']:g}s waited"))
    if settings["paused"]:
        lines.append(Text("dispatch is PAUSED (slotline resume)", style="bold magenta"))
    lines.extend(Text(line) for line in limits_lines(settings))
    return Group(*lines)


def _limit_meaning(limit: Limit) -> str:
    origin = "; from slotline.yaml" if limit.origin == "config" else ""
    if limit.key.startswith("label:"):
        label = limit.key.removeprefix("label:")
        if limit.value is None:
            return f"running tasks per value of label {label}{origin}"
        return f"running tasks labelled {label}={limit.value}{origin}"
    if limit.value is None:
        return f"running tasks per {limit.key}{origin}"
    return f"running tasks with {limit.key} {limit.value}{origin}"
