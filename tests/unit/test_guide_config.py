"""The slotline.yaml of docs/coding-agents.md loads as it is written, with the coding
agents' features it shows: usage rules, resume templates, worktrees, budgets, stalls."""

from __future__ import annotations

import re
from pathlib import Path

from slotline.config.file import load_config
from slotline.config.templates import expand_agent_type
from slotline.worktrees.isolation import KeepPolicy

GUIDE = Path(__file__).parents[2] / "docs" / "coding-agents.md"


def guide_yaml() -> str:
    section = GUIDE.read_text().split("## Configurations for", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert found is not None, "the guide's configuration section has no yaml block"
    return found.group(1)


def test_the_guides_slotline_yaml_loads_with_every_agent_it_shows(tmp_path: Path) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text(guide_yaml())
    config = load_config(path, env={})
    assert set(config.agents) == {"claude", "codex", "opencode", "aider"}
    claude = config.agents["claude"]
    assert claude.resume is not None
    assert "{session_id}" in claude.resume
    assert claude.usage is not None
    assert claude.isolation == "worktree"
    assert claude.keep is KeepPolicy.UNTIL_MERGED
    assert claude.stall_after == 600
    assert config.agents["codex"].resume is not None
    assert config.agents["aider"].usage is not None


def test_a_prompt_like_an_option_stays_the_aider_message(tmp_path: Path) -> None:
    # (one argv element `--message=…`, never an option of its own)
    path = tmp_path / "slotline.yaml"
    path.write_text(guide_yaml())
    config = load_config(path, env={})
    spec = expand_agent_type(config, {"agent": "aider"}, "--help me")
    assert spec["command"][-1] == "--message=--help me"
