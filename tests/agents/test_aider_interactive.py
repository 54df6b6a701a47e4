"""The real aider, interactive, through slotline as docs/coding-agents.md configures it
(`aider-interactive`): started without a message in its own terminal, the prompt typed
as its first line (`first_input`), its question about creating a file answered through
`slotline send`, its edit in the run's worktree, `/exit` ending it with exit status 0,
and its cost read from its last `Cost:` line on the terminal."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from slotline.runner.tmux import Terminal, socket_path
from waiting import until

from .conftest import ENDED, RUN_TIMEOUT, Run, docs_yaml_blocks, ok
from .openai_standin import OpenAIStandin

# The real aider, its stand-in and its repository as test_aider.py sets them up.
from .test_aider import agent, agent_env, repo_files, whole_file

pytestmark = pytest.mark.slow
__all__ = ["agent", "agent_env", "repo_files"]  # fixtures, found by pytest by their names


@pytest.fixture
def node_tmux(tmp_path: Path) -> Iterator[None]:
    yield
    socket = socket_path(tmp_path / "logs")
    subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, check=False)


def aider_interactive() -> dict[str, Any]:
    for block in docs_yaml_blocks("coding-agents.md"):
        loaded = yaml.safe_load(block)
        if isinstance(loaded, dict) and "aider-interactive" in loaded.get("agents", {}):
            found: dict[str, Any] = loaded["agents"]["aider-interactive"]
            return found
    raise AssertionError("docs/coding-agents.md has no aider-interactive type")


def screen(cli: Run, task_id: str) -> str:
    task = ok(cli("--json", "show", task_id))
    terminal = Terminal.of(task["attempts"][-1]["log_path"]) if task["attempts"] else None
    try:
        return terminal.screen() if terminal is not None else ""
    except Exception:
        return ""


def test_aider_gets_its_prompt_typed_asks_and_is_answered_through_send(
    cli: Run, serve: Any, api: OpenAIStandin, repo: Path, tmp_path: Path, node_tmux: None
) -> None:
    config = {
        "agents": {"aider-interactive": aider_interactive()},
        "env_allow": ["*_PROXY", "*_proxy", "LITELLM_LOCAL_MODEL_COST_MAP"],
    }
    (tmp_path / "slotline.yaml").write_text(yaml.safe_dump(config))
    serve()
    api.answer(whole_file("hello.txt", "written by aider\n", (812, 21)))
    task_id = ok(cli("--json", "submit", "--agent", "aider-interactive",
                     "--prompt", "add hello.txt", "--workspace", str(repo)))["id"]  # fmt: skip

    # The prompt typed as its first line reaches the model; aider asks before creating.
    until(lambda: "Create new file?" in screen(cli, task_id), RUN_TIMEOUT, "aider's question")
    (request,) = api.model_requests()
    assert "add hello.txt" in json.dumps(request.body["messages"])
    assert cli("send", task_id, "y").code == 0
    worktree = Path(ok(cli("--json", "show", task_id))["attempts"][-1]["worktree"]["path"])
    until((worktree / "hello.txt").exists, RUN_TIMEOUT, "aider's edit")
    assert (worktree / "hello.txt").read_text() == "written by aider\n"

    # `/exit` ends it: exit 0, its cost read from what it printed on its terminal.
    assert cli("send", task_id, "/exit").code == 0
    task = until(
        lambda: (t := ok(cli("--json", "show", task_id)))["status"] in ENDED and t, RUN_TIMEOUT
    )
    assert task["status"] == "succeeded", task
    (attempt,) = task["attempts"]
    assert attempt["exit_code"] == 0
    assert attempt["usage"]["input_tokens"] == 812
    assert attempt["usage"]["output_tokens"] == 21
    assert attempt["usage"]["cost_usd"] > 0
    assert "+written by aider" in cli("diff", task_id).out
    assert api.outside() == []
