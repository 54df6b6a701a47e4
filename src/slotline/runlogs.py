"""Where an attempt's output is written, and what to say when there is none."""

from __future__ import annotations

import os
import re
from pathlib import Path

from slotline.models import Attempt, Kind, Task


def log_file(log_dir: Path, task_id: str, number: int) -> str:
    """Where the output of attempt `number` of a task goes, under a node's log folder."""
    # os.path, not pathlib: a claim computes one per start (pathlib's parsing costs
    # several times the join); `log_dir` is a Path already, so both spell it alike.
    return os.path.join(log_dir, task_id, f"{number}.log")


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


# What a terminal program prints besides text: CSI sequences (colours, cursor moves,
# erasing: ESC [ … final), OSC strings (a window title, a hyperlink: ESC ] … BEL or
# ESC \), DCS/APC/PM/SOS strings (ESC P/_/^/X … ESC \), character set choices (ESC ( B)
# and the other two-byte escapes (ESC =, ESC 7, ESC M).
_SEQUENCE = re.compile(
    rb"\x1b\[[0-?]*[ -/]*[@-~]"
    rb"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    rb"|\x1b[P_^X][^\x1b]*\x1b\\"
    rb"|\x1b[()*+\-./][ -~]"
    rb"|\x1b[ -/]*[0-~]"
)
# An escape that may still be going on at the end of a chunk (kept for the next one).
_UNFINISHED = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*|[P_^X][^\x1b]*|[()*+\-./]|[ -/]*)?\x1b?$"
)
# An unfinished escape is given up on (written as it is) past this many bytes.
_CARRY_MAX = 4096


class Plain:
    """What an interactive run printed, as text: its terminal's escape sequences taken
    out and its line ends made plain (CR LF to LF), as `logs` shows it; the log itself
    keeps them, for a replay. Fed in chunks: a sequence split between two chunks is
    still taken out whole."""

    def __init__(self) -> None:
        self._carry = b""

    def feed(self, data: bytes, final: bool = False) -> bytes:
        data = self._carry + data
        self._carry = b""
        if not final:
            unfinished = _UNFINISHED.search(data)
            if unfinished is not None and len(data) - unfinished.start() <= _CARRY_MAX:
                self._carry = data[unfinished.start() :]
                data = data[: unfinished.start()]
            elif data.endswith(b"\r"):  # its LF may come in the next chunk
                self._carry, data = b"\r", data[:-1]
        return _SEQUENCE.sub(b"", data).replace(b"\r\n", b"\n")


def plain_text(data: bytes) -> bytes:
    """`data` whole, as `Plain` gives it."""
    return Plain().feed(data, final=True)
