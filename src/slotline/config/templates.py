"""From configuration to task fields: an agent type's command template filled with a
prompt, and the task of each schedule slotline.yaml declares. The CLI, the HTTP API and
`serve` submit through these, so an agent type means the same on every surface."""

from __future__ import annotations

from typing import Any

from slotline.bounds import normalize_workspace
from slotline.config.file import Config
from slotline.errors import InvalidInput
from slotline.models import Task
from slotline.sessions import session_placeholder


def expand_agent_type(config: Config, data: dict[str, Any], prompt: str | None) -> dict[str, Any]:
    """Submit fields for an agent type: its command template filled (the prompt as one
    argv element) and its defaults (timeout, attempts, memory cap, expected duration)
    where the caller gave none. Fields with a command of their own pass through.

    Raises:
        InvalidInput: a prompt without an agent type, an unknown agent type, a value
            that would become an option (`AgentType.check_options`), or a relative
            workspace.
    """
    agent = data.get("agent")
    if not builds_command(data):
        if prompt is not None:
            raise InvalidInput("prompt: give an agent type and a prompt, or a command, not both")
        return _default_keep(config, data)
    if agent is None:
        if prompt is not None:
            raise InvalidInput("prompt: name the agent type it is for (--agent NAME)")
        return _default_keep(config, data)
    template = config.agent(agent)  # an unknown type is refused, naming the known ones
    if prompt is None:
        raise InvalidInput(f"agent type {agent!r} needs a prompt")
    workspace = data.get("workspace")
    if workspace is not None:
        data = {**data, "workspace": normalize_workspace(workspace)}
    values = {
        "prompt": prompt,
        "workspace": data.get("workspace") or "",
        "title": data.get("title") or "",
        "user": data.get("user") or "",
        "agent": agent,
    }
    template.check_options(agent, values)
    filled = {k: v for k, v in data.items() if v is not None}
    filled["command"] = template.argv(values)
    defaults = {
        "timeout": template.timeout,
        "max_attempts": template.max_attempts,
        "memory_mb": template.memory_mb,
        "expected_duration": template.expected_duration,
        "title": prompt if len(prompt) <= 80 else prompt[:77] + "...",
        "isolation": template.isolation,
        "repo": template.repo,
        "base": template.base,
        "keep": None if template.keep is None else template.keep.value,
        "interactive": template.interactive or None,
        "first_input": None
        if template.first_input is None
        else template.argv(values, [template.first_input])[0],
    }
    for key, value in defaults.items():
        if value is not None:
            filled.setdefault(key, value)
    return _default_keep(config, filled)


def builds_command(data: dict[str, Any]) -> bool:
    """Whether submit fields leave the command to an agent type's template: they name no
    command or callable of their own (`agent` may still be missing)."""
    own = data.get("command") or data.get("callable")
    return not own and data.get("kind") in (None, "command")


def _default_keep(config: Config, data: dict[str, Any]) -> dict[str, Any]:
    """A worktree task without `keep` gets `worktrees.keep` of slotline.yaml, if set."""
    keep = config.worktrees.keep
    if data.get("isolation") == "worktree" and data.get("keep") is None and keep is not None:
        return {**data, "keep": keep.value}
    return data


def declared_schedules(config: Config) -> list[dict[str, Any]]:
    """The schedules of slotline.yaml as `Store.sync_schedules` takes them: each task's
    agent type filled in (`expand_agent_type`).

    Raises:
        InvalidInput: a task is wrong; the message names the schedule.
    """
    declared = []
    for name, item in config.schedules.items():
        fields = dict(item.task)
        prompt = fields.pop("prompt", None)
        try:
            task = expand_agent_type(config, fields, prompt)
        except InvalidInput as exc:
            raise InvalidInput(f"schedules.{name}.task: {exc}") from None
        declared.append({**item.model_dump(), "name": name, "task": task})
    return declared


def followup_fields(
    config: Config, followed: Task, prompt: str, user: str | None = None
) -> dict[str, Any]:
    """Submit fields of a follow-up of `followed` (`slotline followup`): its agent type,
    workspace, repository and isolation, the `resume` template filled with `prompt` as
    its command (`{session_id}` is filled when it starts, from the latest run of
    `followed` that printed one; until then it shows `<session of FOLLOWED>`). Submit
    them with `Store.submit_followup`.

    Raises:
        InvalidInput: `followed` has no agent type, its type (in `config`) has no
            `resume` template, it has ended without any run printing a session id, or
            the prompt would be read as an option.
    """
    agent = followed.agent
    if agent is None:
        raise InvalidInput(
            f"task {followed.id[:8]} has no agent type: only an agent's session can be followed up"
        )
    template = config.agent(agent)
    if template.resume is None:
        raise InvalidInput(
            f"agent type {agent!r} has no resume template: a follow-up continues the "
            "session through it (see docs/coding-agents.md)"
        )
    if not prompt.strip():
        raise InvalidInput("prompt: give the follow-up's prompt")
    if followed.status.terminal and not any(a.session_id for a in followed.attempts):
        raise InvalidInput(
            f"task {followed.id[:8]} has ended and none of its runs printed a session id "
            f"that agent type {agent!r}'s usage rules read: there is no session to follow "
            f"up; submit a new task instead (slotline submit --agent {agent} --prompt …)"
        )
    values = {
        "prompt": prompt,
        "workspace": followed.workspace or "",
        "title": followed.title or "",
        "user": user or followed.user or "",
        "agent": agent,
    }
    template.check_options(agent, {**values, "session_id": "id"}, template.resume)
    # Shown as the task's command; the node renders the template again when the
    # follow-up starts, with the session then known (`Task.command_run` shows it).
    placeholder = session_placeholder(followed.id)
    command = template.argv({**values, "session_id": placeholder}, template.resume)
    fields: dict[str, Any] = {
        "agent": agent,
        "command": command,
        "workspace": followed.workspace,
        "user": user or followed.user,
        "title": prompt if len(prompt) <= 80 else prompt[:77] + "...",
        "priority": followed.priority.label,
        "timeout": template.timeout,
        "memory_mb": template.memory_mb,
        "expected_duration": template.expected_duration,
        "repo": followed.repo,
        "depends_on": [followed.id],
    }
    isolation = followed.isolation
    if isolation is not None:
        fields.update(
            isolation="worktree",
            base=isolation.base,
            base_commit=isolation.base_commit,
            keep=isolation.keep.value,
        )
    return {key: value for key, value in fields.items() if value is not None}
