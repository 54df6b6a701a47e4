"""The environment of a spawned command: an allow-listed base, the task's env, SLOTLINE_*."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Mapping, Sequence

from slotline.config.agent_types import AgentType
from slotline.config.file import holds_secret
from slotline.models import Attempt, Task
from slotline.tasktoken import mint_task_token

# Names passed through from the node's environment; everything else is dropped so that
# secrets of the node do not leak into agents by accident. Extend with `env_allow`
# (slotline.yaml's, and an agent type's for its own runs): `allow_list`.
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


def allow_list(env_allow: Sequence[str] = (), agent: AgentType | None = None) -> tuple[str, ...]:
    """The names and patterns of the node's environment a run gets: the base list, the
    node's `env_allow` (slotline.yaml's, `serve --env-allow`), and for a task of an
    agent type this node knows, that type's `env_required` and `env_allow`, which no
    other type's runs get. Each once, in that order: a list that already holds the base
    list (a node's) can be given again."""
    own = () if agent is None else (*agent.env_required, *agent.env_allow)
    return tuple(dict.fromkeys((*BASE_ALLOW, *env_allow, *own)))


def build_env(
    task: Task,
    attempt: Attempt,
    store_url: str,
    base: Mapping[str, str] | None = None,
    allow: Sequence[str] = BASE_ALLOW,
    api_url: str | None = None,
) -> dict[str, str]:
    """Allowed base variables, then the task's own, then slotline's (which win).

    The run reaches slotline (to submit subtasks, steer them) through the node's HTTP API
    when it serves one: `SLOTLINE_URL` and a task token in `SLOTLINE_TOKEN`, scoped to
    the task's subtree and dead once the attempt ends. Else through `SLOTLINE_STORE`,
    given only when the store URL holds no secret: a store password would let any agent
    write the store directly, past every role.
    """
    env = allowed_env(allow, base)
    env.update(task.env)
    env["SLOTLINE_TASK_ID"] = task.id
    env["SLOTLINE_ATTEMPT"] = str(attempt.number)
    env["SLOTLINE_ATTEMPT_ID"] = attempt.id
    if api_url is not None:
        env.pop("SLOTLINE_STORE", None)  # one way to slotline: the CLI refuses two
        env["SLOTLINE_URL"] = api_url
        env["SLOTLINE_TOKEN"] = mint_task_token(attempt)
    elif not holds_secret(store_url):
        env["SLOTLINE_STORE"] = store_url
    return env


def allowed_env(allow: Sequence[str], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `base` (default: this process's environment) that the allow-list's
    names and patterns let through."""
    source = os.environ if base is None else base
    allowed = _matcher(tuple(allow)).match
    # By name first: `os.environ` decodes each value it is asked for, and most of its
    # names are not allowed (a spawn runs this for each command).
    return {k: source[k] for k in source if allowed(k)}


@functools.cache
def _matcher(allow: tuple[str, ...]) -> re.Pattern[str]:
    """One regular expression for the allow-list's patterns (matched case-sensitively, as
    `fnmatchcase`), compiled once: a spawn tests every variable of the node's
    environment against it."""
    return re.compile("|".join(fnmatch.translate(pattern) for pattern in allow))
