"""One frame of `slotline top`: utilization bar, running agents with their usage, the line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from slotline.cli.pacing import status_lines
from slotline.cli.plain import NEXT_UP, duration, eta_text, short_ids, why_text
from slotline.cli.render import keep_widths, run_marks, text
from slotline.models import Task
from slotline.runner.proctree import Usage, size
from slotline.store import QueueStatus

BAR_WIDTH = 20
# Lines a frame needs besides the rows of its two tables.
CHROME_LINES = 12
MIN_QUEUE_ROWS = 3
KEYS_HELP = "↑/↓ select   c cancel   b bump   u/d move up/down   q quit"
SELECTED = "reverse"


@dataclass
class View:
    """Everything a frame shows; `usage` maps a running task id to its tree's usage."""

    status: QueueStatus
    now: float
    usage: Mapping[str, Usage | None] = field(default_factory=dict)
    selected: str | None = None
    message: Text | None = None
    height: int = 40
    interactive: bool = True


def selectable(status: QueueStatus) -> list[str]:
    """Task ids in the order the frame lists them: running, then queued."""
    return [t.id for t in status.running] + [t.id for t in status.queued]


def render(view: View) -> RenderableType:
    parts: list[RenderableType] = [_bar(view.status, view.now)]
    parts.extend(status_lines(view.status, view.now))  # rates, back-off: only when in force
    parts.append(Text())
    parts.append(_running(view))
    parts.append(Text())
    parts.append(_queued(view))
    if view.interactive:
        parts.append(Text())
        parts.append(view.message or Text(""))
        parts.append(Text(KEYS_HELP, style="dim"))
    return Group(*parts)


def _bar(status: QueueStatus, now: float) -> Text:
    """`[██████░░░░] 2/3 running · 1 slot available · 4 queued · PAUSED   12:00:03`."""
    limit = max(status.max_concurrent, 1)
    filled = min(BAR_WIDTH, round(BAR_WIDTH * status.active / limit))
    over = status.active > status.max_concurrent or status.over_limit
    colour = "red" if over else "yellow" if status.at_capacity else "green"
    line = Text("[")
    line.append("█" * filled, style=colour)
    line.append("░" * (BAR_WIDTH - filled), style="dim")
    line.append("] ")
    line.append(f"{status.active}/{status.max_concurrent} running", style="bold")
    slots = status.slots_available
    line.append(f" · {slots} slot{'' if slots == 1 else 's'} available")
    line.append(f" · {len(status.queued)} queued")
    if status.over_limit:
        line.append(" · OVER LIMIT", style="bold red")
    if status.paused:
        line.append(" · PAUSED", style="bold magenta")
    line.append("   " + datetime.fromtimestamp(now).strftime("%H:%M:%S"), style="dim")
    return line


def _table(title: str) -> Table:
    return Table(
        box=box.SIMPLE_HEAD,
        title=title,
        title_justify="left",
        pad_edge=False,
        show_edge=False,
        expand=False,
    )


def _title(table: Table) -> None:
    table.add_column("TITLE", no_wrap=True, overflow="ellipsis", ratio=1, min_width=12)


def _running(view: View) -> RenderableType:
    running = view.status.running
    if not running:
        return Text("nothing running", style="dim")
    ids = short_ids(t.id for t in running)
    table = _table(f"RUNNING ({len(running)})")
    table.add_column("ID", no_wrap=True)
    _title(table)
    table.add_column("AGENT", no_wrap=True, overflow="ellipsis", max_width=16)
    for name in ("RUNTIME", "PID", "CPU%", "RSS"):
        table.add_column(name, no_wrap=True, justify="right")
    for task in running:
        attempt = task.attempts[-1] if task.attempts else None
        pid = attempt.pid if attempt is not None else None
        usage = view.usage.get(task.id)
        started = task.started_at or (attempt.started_at if attempt else None)
        title = text(task.title)
        if attempt is not None and attempt.over_limit:
            title.append(" (over limit)", style="red")
        title.append(run_marks(task), style="bold yellow")
        table.add_row(
            ids[task.id],
            title,
            text(task.agent),
            duration(None if started is None else view.now - started),
            "-" if pid is None else str(pid),
            "-" if usage is None else f"{usage.cpu_percent:.0f}",
            "-" if usage is None else size(usage.rss),
            style=SELECTED if task.id == view.selected else None,
        )
    return keep_widths(table)


def _queued(view: View) -> RenderableType:
    queued = view.status.queued
    if not queued:
        return Text("nothing queued", style="dim")
    room = max(MIN_QUEUE_ROWS, view.height - CHROME_LINES - len(view.status.running))
    start = _window_start(queued, view.selected, room)
    shown = queued[start : start + room]
    ids = short_ids(t.id for t in queued)
    table = _table(f"QUEUED ({len(queued)})")
    for name in ("POS", "", "ID", "PRI"):
        table.add_column(name, no_wrap=True)
    _title(table)
    table.add_column("AGENT", no_wrap=True, overflow="ellipsis", max_width=16)
    table.add_column("WAITED", no_wrap=True, justify="right")
    table.add_column("ETA START", no_wrap=True, justify="right")
    table.add_column("WHY NOT NOW", no_wrap=True, overflow="ellipsis", ratio=1, min_width=11)
    first = view.status.next_up
    for task in shown:
        priority = Text(task.priority.label)
        if task.boosted:
            priority.append("+", style="bold")
        table.add_row(
            str(task.position),
            Text(NEXT_UP, style="bold green") if task.id == first else "",
            ids[task.id],
            priority,
            text(task.title),
            text(task.agent),
            duration(view.now - (task.queued_at or task.created_at)),
            eta_text(task, view.now),
            why_text(task),
            style=SELECTED if task.id == view.selected else None,
        )
    hidden_after = len(queued) - start - len(shown)
    if not start and not hidden_after:
        return keep_widths(table)
    more = Text(f"{start} above, {hidden_after} below", style="dim")
    return Group(keep_widths(table), more)


def _window_start(queued: list[Task], selected: str | None, room: int) -> int:
    """The first queued row to show, so that the selected one is on screen."""
    ids = [t.id for t in queued]
    if selected not in ids:
        return 0
    index = ids.index(selected)
    return max(0, min(index - room // 2, len(queued) - room))
