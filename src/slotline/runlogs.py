"""Where an attempt's output is written, and what to say when there is none."""

from __future__ import annotations

import os
from pathlib import Path

from slotline.models import Attempt, Kind, Task


def log_file(log_dir: Path, task_id: str, number: int) -> str:
    """Where the output of attempt `number` of a task goes, under a node's log folder."""
    return str(log_dir / task_id / f"{number}.log")


def why_no_log(task: Task, attempt: Attempt) -> str:
    """Why `attempt` (one with no log file) has none, as a sentence about it. A command's
    attempt that ended with neither a log nor an exit code never spawned its process: it
    failed to start, and its reason says why ("command not found: x")."""
    where = f"attempt {attempt.number} of task {task.id[:8]}"
    if attempt.finished_at is None:
        return f"{where} has no log yet: its process is starting"
    if task.kind is Kind.COMMAND and attempt.exit_code is None:
        reason = attempt.reason or "no reason was recorded"
        if attempt.outcome == "failed":
            return f"{where} failed to start: {reason}"
        return f"{where} ended before its command started ({attempt.outcome}: {reason})"
    return f"{where} has no log file (a {task.kind} task)"


def default_log_dir(store: object) -> Path:
    """Where a node keeps its runs' logs (and, beside them, its worktrees) by default:
    beside a SQLite store's file, else in the user's data folder."""
    path = getattr(store, "path", None)
    if isinstance(path, Path):
        return path.parent / "logs"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "slotline" / "logs"
