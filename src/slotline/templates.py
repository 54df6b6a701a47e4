"""From configuration to task fields: an agent type's command template filled with a
prompt, and the task of each schedule slotline.yaml declares. The CLI, the HTTP API and
`serve` submit through these, so an agent type means the same on every surface."""

from __future__ import annotations

from typing import Any

from slotline.bounds import normalize_workspace
from slotline.config import Config
from slotline.errors import InvalidInput


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
    if data.get("command") or data.get("callable") or data.get("kind") not in (None, "command"):
        if prompt is not None:
            raise InvalidInput("prompt: give an agent type and a prompt, or a command, not both")
        return data
    if agent is None:
        if prompt is not None:
            raise InvalidInput("prompt: name the agent type it is for (--agent NAME)")
        return data
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
    }
    for key, value in defaults.items():
        if value is not None:
            filled.setdefault(key, value)
    return filled


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
