"""A task shown whole (`slotline show`): its state, command, runs, worktrees and result."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from slotline.cli.plain import (
    ago,
    duration,
    printable,
    short_id,
    timestamp,
    why_text,
)
from slotline.cli.render import eta_cell, new_table, task_state, text
from slotline.models import ResumedFrom, Status, Task
from slotline.pacing.spend import describe

# How much of a function's result `show` prints (`--json` has all of it).
RESULT_SHOWN = 2000


def task_detail(task: Task, now: float) -> RenderableType:
    """`slotline show`: every field a person needs, then the attempts."""
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold", no_wrap=True)
    fields.add_column()
    state = task_state(task)
    marked = task.needs_input_at or task.stalled_at
    if marked is not None and task.status is Status.RUNNING:
        state.append(f" since {ago(marked, now)}")
    if task.position is not None:
        state.append(f" (position {task.position}{', NEXT UP' if task.next_up else ''})")
    if task.status_reason:
        state.append(f" — {printable(task.status_reason)}")
    rows: list[tuple[str, str | Text | None]] = [
        ("id", task.id),
        ("status", state),
        ("title", text(task.title)),
        ("command", text(shlex.join(task.command_run)) if task.command else None),
        ("callable", task.callable),
        ("priority", task.priority.label + (" (boosted)" if task.boosted else "")),
        ("agent", task.agent),
        ("workspace", text(task.workspace) if task.workspace else None),
        ("repo", text(task.repo) if task.repo else None),
        ("isolation", text(_isolation(task)) if task.isolation else None),
        ("user", task.user),
        ("labels", text(_labels(task.labels)) if task.labels else None),
        ("depends on", ", ".join(short_id(d) for d in task.depends_on) or None),
        ("parent", short_id(task.parent_id) if task.parent_id else None),
        ("attempts", f"{len(task.attempts)} (max {task.max_attempts})"),
        ("timeout", duration(task.timeout) if task.timeout else None),
        ("queue ttl", duration(task.queue_ttl) if task.queue_ttl else None),
        ("created", timestamp(task.created_at, now)),
        ("start at", timestamp(task.run_at, now) if task.run_at else None),
        ("not before", timestamp(task.not_before, now) if task.not_before else None),
        ("key", text(task.key) if task.key else None),
        ("schedule", task.schedule),
        ("started", timestamp(task.started_at, now) if task.started_at else None),
        ("finished", timestamp(task.finished_at, now) if task.finished_at else None),
        ("waiting", why_text(task) if task.waiting_reason else None),
        ("eta start", eta_cell(task.eta_start, task, now, end=False)),
        ("eta end", eta_cell(task.eta_finish, task, now, end=True)),
        ("eta basis", text(task.eta_basis) if task.eta_basis else None),
        ("no estimate", text(task.eta_unavailable) if task.eta_unavailable else None),
        ("exit code", None if task.exit_code is None else str(task.exit_code)),
        ("failure", text(task.failure_reason) if task.failure_reason else None),
        ("refused", _refused(task)),
        ("result", None if task.result is None else text(_result(task.result))),
        ("log", task.attempts[-1].log_path if task.attempts else None),
    ]
    for name, value in rows:
        if value is not None:
            fields.add_row(name, value if isinstance(value, Text) else Text(value))
    if not task.attempts:
        return fields
    attempts = new_table("#", "PID", "STARTED", "TOOK", "EXIT", title="ATTEMPTS")
    spent = any(a.usage for a in task.attempts)
    if spent:
        attempts.add_column("SPENT", no_wrap=True)
    attempts.add_column("OUTCOME", overflow="fold")
    for attempt in task.attempts:
        took = None if attempt.finished_at is None else attempt.finished_at - attempt.started_at
        outcome = attempt.outcome or "running"
        if attempt.over_limit:
            outcome += " (over limit)"
        if attempt.reason and attempt.reason != outcome:
            outcome += f": {attempt.reason}"
        if attempt.resumed_from is not None:
            outcome += f" (resumed {_resumed(task, attempt.resumed_from)})"
        if attempt.denied_tools:
            refused = len(attempt.denied_tools)
            outcome += f" (REFUSED {refused} tool use{'' if refused == 1 else 's'})"
        usage = attempt.usage
        attempts.add_row(
            str(attempt.number),
            "-" if attempt.pid is None else str(attempt.pid),
            ago(attempt.started_at, now),
            duration(took),
            "-" if attempt.exit_code is None else str(attempt.exit_code),
            *([describe(*(usage.cost_usd, usage.input_tokens, usage.output_tokens)
                        if usage else (None, None, None))] if spent else []),
            text(outcome),
        )  # fmt: skip
    if not any(a.worktree for a in task.attempts):
        return Group(fields, Text(), attempts)
    return Group(fields, Text(), attempts, Text(), _worktrees(task))


def _refused(task: Task) -> Text | None:
    """What the agent of the task's latest run was refused, impossible to miss."""
    denied = task.attempts[-1].denied if task.attempts else None
    return None if denied is None else Text(printable(denied), style="bold red")


def _resumed(task: Task, source: ResumedFrom) -> str:
    if source.task_id == task.id:
        return f"#{source.attempt}'s session"
    return f"the session of {short_id(source.task_id)} #{source.attempt}"


def _isolation(task: Task) -> str:
    iso = task.isolation
    assert iso is not None
    base = (iso.base_commit or "")[:10]
    if iso.base and iso.base != iso.base_commit:
        base = f"{iso.base} ({base})" if base else iso.base
    return f"worktree from {base or 'HEAD'}, keep {iso.keep.value}"


def _worktrees(task: Task) -> Table:
    """Each attempt's worktree: branch, state, diff stat, folder."""
    table = new_table("#", "BRANCH", "STATE", "CHANGES", title="WORKTREES")
    table.add_column("PATH", overflow="fold")
    for attempt in task.attempts:
        tree = attempt.worktree
        if tree is None:
            continue
        diff = tree.diff
        changes = "-" if diff is None else (
            f"{diff.files} file{'s' if diff.files != 1 else ''} "
            f"+{diff.insertions} -{diff.deletions}"
        )  # fmt: skip
        path = "-" if tree.state.value == "removed" else tree.path
        state = tree.state.value
        if tree.merged is not None:
            state += f", merged into {tree.merged.into}"
        table.add_row(str(attempt.number), text(tree.branch), text(state), changes, text(path))
    return table


def _labels(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items()))


def _result(value: object) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    if len(shown) > RESULT_SHOWN:
        more = len(shown) - RESULT_SHOWN
        shown = f"{shown[:RESULT_SHOWN]}… ({more} more characters: --json shows all)"
    return shown
