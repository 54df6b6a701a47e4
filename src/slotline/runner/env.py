"""The environment of a spawned command: an allow-listed base, the task's env, SLOTLINE_*."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping, Sequence

from slotline.models import Attempt, Task

# Names passed through from the node's environment; everything else is dropped so that
# secrets of the node do not leak into agents by accident. Extend with `env_allow`.
BASE_ALLOW: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "TMPDIR",
    "XDG_*",
    "SSH_AUTH_SOCK",
    "COLORTERM",
    "NO_COLOR",
)


def build_env(
    task: Task,
    attempt: Attempt,
    store_url: str,
    base: Mapping[str, str] | None = None,
    allow: Sequence[str] = BASE_ALLOW,
) -> dict[str, str]:
    """Allowed base variables, then the task's own, then slotline's (which win)."""
    source = os.environ if base is None else base
    env = {k: v for k, v in source.items() if any(fnmatch.fnmatchcase(k, p) for p in allow)}
    env.update(task.env)
    env["SLOTLINE_TASK_ID"] = task.id
    env["SLOTLINE_ATTEMPT"] = str(attempt.number)
    env["SLOTLINE_ATTEMPT_ID"] = attempt.id
    env["SLOTLINE_STORE"] = store_url
    return env
