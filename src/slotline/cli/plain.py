"""Plain-text pieces of the CLI's output: ids, relative times, a task's place in line,
events as lines, and JSON. No rich here: commands that print only these (`submit`, the
steering verbs, `--json` reads) do not import it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import click

from slotline.clock import iso
from slotline.models import Event, Status, Task

NEXT_UP = "NEXT UP"


def print_json(data: Any) -> None:
    """JSON on stdout, exactly as documented in docs/cli.md: strict JSON, so a value that
    JSON cannot hold (inf, NaN) is an error, never `Infinity` in the output."""
    click.echo(strict_json(data, indent=2))


def strict_json(data: Any, indent: int | None = None) -> str:
    """The one JSON encoding of CLI output (`--json`, `events --json`, `export`)."""
    return json.dumps(data, indent=indent, ensure_ascii=False, allow_nan=False)


def short_id(task_id: str | None) -> str:
    return task_id[:8] if task_id else "-"


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id's prefix of at least 8 digits, long enough that no two in `ids` share it
    (a listing shows prefixes a person can paste back)."""
    unique = sorted(set(ids))
    width = 8
    while width < 32 and len({i[:width] for i in unique}) < len(unique):
        width += 2
    return {i: i[:width] for i in unique}


# Terminal control characters: C0, DEL, C1, and the bidirectional overrides that reorder
# what a terminal shows. A title or label set over HTTP may hold any of them.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# The same in a log, whose lines and tabs are its layout, not a trick.
_CONTROL_BUT_LINES = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def printable(value: str, lines: bool = False) -> str:
    """`value` with every terminal control character escaped (ESC as backslash-x1b), so
    that text from a task can neither move the cursor, recolour nor rewrite the screen.
    The one escaping of task text for people: `ls`, `show`, `status`, `top`, `events`,
    and (with `lines`: newlines and tabs kept) `logs` on a terminal."""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return (_CONTROL_BUT_LINES if lines else _CONTROL).sub(escape, value)


def ago(ts: float | None, now: float) -> str:
    """A time relative to now: `12s ago`, `3m ago`, `in 40s`, or `-`."""
    if ts is None:
        return "-"
    delta = now - ts
    text = _span(abs(delta))
    return f"{text} ago" if delta >= 0 else f"in {text}"


def _span(seconds: float) -> str:
    if seconds < 60:
        return f"{int(seconds)}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m"
    if seconds < 86400:
        hours, rest = divmod(int(seconds), 3600)
        return f"{hours}h{rest // 60:02d}m" if hours < 10 else f"{hours}h"
    return f"{int(seconds // 86400)}d"


def until(ts: float | None, now: float) -> str:
    """An estimate relative to now: `in ~3m`, `now`, or `-` when there is none."""
    if ts is None:
        return "-"
    return "now" if ts - now < 1 else f"in ~{_span(ts - now)}"


def eta_text(task: Task, now: float) -> str:
    """`ls`: the estimated start of a task in line, the estimated end of a running one
    (`past its estimate` once it has run longer than expected; `unknown` when nothing
    says how long its runs take)."""
    if task.status is Status.RUNNING:
        return ends_text(task, now, prefix="ends ")
    if task.eta_start is None and task.eta_unavailable is not None:
        return "unknown"
    return until(task.eta_start, now)


def ends_text(task: Task, now: float, prefix: str = "") -> str:
    """When a running task is expected to end: `in ~3m`, `past its estimate`, `unknown`."""
    if task.eta_overdue:
        return "past its estimate"
    if task.eta_finish is None:
        return "unknown" if task.eta_unavailable is not None else "-"
    return prefix + until(task.eta_finish, now)


def why_text(task: Task) -> str:
    """Why a task in line does not start now, or `-`."""
    return "-" if task.waiting_reason is None else printable(task.waiting_reason.text)


def duration(seconds: float | None) -> str:
    return "-" if seconds is None else _span(seconds)


def timestamp(ts: float | None, now: float) -> str:
    """Absolute and relative: `2026-01-02 10:11:12Z (12s ago)`."""
    if ts is None:
        return "-"
    text = datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    return f"{text} ({ago(ts, now)})"


def event_line(event: Event) -> str:
    """`slotline events`: `SEQ  TIME  KIND  TASK  key=value…` on one line."""
    at = iso(event.at) or "-"
    data = " ".join(f"{k}={_value(v)}" for k, v in event.data.items() if v is not None)
    return f"{event.seq:>6}  {at[:19]}Z  {event.kind:<18} {short_id(event.task_id):<8}  {data}"


def _value(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in "\"'" for c in value):
        return printable(value)
    return printable(json.dumps(value, ensure_ascii=False))


def describe_place(task: Task, now: float | None = None) -> str:
    """`queued, position 2, starts in ~3m`, `waiting for 3f2a1b2c`, `held`, `blocked: …`,
    with why a task in line waits (`— all 3 slots are taken`); `…; no estimate: WHY`
    when its start could not be estimated."""
    place = _place(task, now)
    if task.eta_unavailable is not None and task.eta_start is None:
        return f"{place}; no estimate: {task.eta_unavailable}"
    return place


def _place(task: Task, now: float | None) -> str:
    if task.status is Status.QUEUED and task.position is not None:
        where = f"queued, position {task.position}"
        where += f" ({NEXT_UP})" if task.next_up else ""
        if task.run_at is not None and now is not None and task.run_at > now:
            where += f", not before {timestamp(task.run_at, now)}"
        elif task.eta_start is not None and now is not None:
            where += f", starts {until(task.eta_start, now)}"
        reason = task.waiting_reason
        if reason is not None and reason.kind != "start_time":
            where += f" — {printable(reason.text)}"
        return where
    if task.status is Status.WAITING:
        return "waiting for " + ", ".join(short_id(d) for d in task.depends_on)
    if task.status_reason and task.status_reason != task.status.value:
        return f"{task.status}: {task.status_reason}"
    return str(task.status)
