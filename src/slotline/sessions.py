"""What an agent's run says beyond its exit code, in words and marks shared by the store
and the surfaces: the placeholder of the session a follow-up continues (filled in once
the node knows it), and the tool uses the agent was refused."""

from __future__ import annotations

import re

# What a follow-up's stored command holds in place of the agent session it continues,
# which the node knows only when the follow-up starts (`Task.command_run` fills it in);
# one queued before placeholders holds the template's literal `{session_id}`.
SESSION_PLACEHOLDER = re.compile(r"<session of [0-9a-f]{8}>|\{session_id\}")


def session_placeholder(task_id: str) -> str:
    """The placeholder of the session of task `task_id` (and of its follow-ups)."""
    return f"<session of {task_id[:8]}>"


def refused_tools(tools: tuple[str, ...]) -> str | None:
    """What an agent was refused (one tool name per refusal), in words; None: nothing. A
    run that exits 0 but was refused its edits did nothing, and must not pass for a
    success."""
    if not tools:
        return None
    uses = "tool use" if len(tools) == 1 else "tool uses"
    return (
        f"agent was refused {len(tools)} {uses}: {', '.join(dict.fromkeys(tools))} — its "
        "permission mode may not allow them (see docs/coding-agents.md)"
    )
