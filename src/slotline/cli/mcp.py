"""`slotline mcp`: the MCP tools on stdio, for an agent's MCP configuration."""

from __future__ import annotations

import os

import click

from slotline.cli.context import CliState, pass_state


@click.command("mcp")
@pass_state
def mcp_command(state: CliState) -> None:
    """Serve the MCP tools on stdin/stdout (docs/mcp.md).

    Add `slotline mcp` to Claude Code, opencode or Codex CLI as an MCP server. It works
    on the store (--store, $SLOTLINE_STORE) or through a server (--url and --token, or
    $SLOTLINE_URL and $SLOTLINE_TOKEN, as every run has them). Inside a run, your tasks
    are the subtree of $SLOTLINE_TASK_ID and subtasks are submitted under it.
    """
    from slotline.mcp.calls import BackendCalls
    from slotline.mcp.tools import build_server

    calls = BackendCalls(state.store, state.config, os.environ.get("SLOTLINE_TASK_ID") or None)
    build_server(lambda _ctx: calls, log_level="WARNING").run("stdio")
