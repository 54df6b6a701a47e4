"""Every ```yaml block of README.md and docs/*.md loads, so the docs cannot drift from the
code: it parses, and a slotline.yaml (or a piece of one) loads as `slotline serve` loads
it (`load_config`, then `apply_config` into a store: schedules, limits, rates, budgets).

A block whose top-level keys are settings of slotline.yaml is loaded as a slotline.yaml; one
whose keys are settings of an agent type (a bare `backoff:`) is loaded inside a minimal
agent type. Any other block must be named in NOT_SLOTLINE_YAML with the reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from slotline.cli.apply import apply_config
from slotline.config.agent_types import AgentType
from slotline.config.file import Config, load_config
from slotline.errors import InvalidInput
from slotline.store import open_store

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Blocks that are not slotline configuration, by (page, first line): parsed, not validated.
# Keep it short: an example of slotline.yaml belongs in slotline's loader, not here.
NOT_SLOTLINE_YAML: dict[tuple[str, str], str] = {}

CONFIG_KEYS = frozenset(Config.model_fields)
AGENT_TYPE_KEYS = frozenset(AgentType.model_fields)
# (an indented fence, inside a list item, closes at the same indent)
FENCE = re.compile(r"^(?P<indent> *)```yaml[^\n]*\n(?P<body>.*?)^(?P=indent)```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One ```yaml block: its page (relative to the repository), the page's line of its
    opening fence, and its text."""

    page: str
    line: int
    text: str

    @property
    def first_line(self) -> str:
        return next((line.strip() for line in self.text.splitlines() if line.strip()), "")

    def padded(self, header: str = "") -> str:
        """Its text, preceded by `header` and enough blank lines that a line number in
        an error is the page's line number."""
        lead = self.line - header.count("\n")
        assert lead >= 0, f"{self.page}:{self.line}: block too close to the top to wrap"
        return "\n" * lead + header + self.text


def yaml_blocks(page: Path) -> list[Block]:
    text = page.read_text()
    blocks = []
    for found in FENCE.finditer(text):
        indent = len(found["indent"])
        body = "".join(line[indent:] for line in found["body"].splitlines(keepends=True))
        line = text.count("\n", 0, found.start()) + 1
        blocks.append(Block(str(page.relative_to(ROOT)), line, body))
    return blocks


BLOCKS = [block for page in PAGES for block in yaml_blocks(page)]


def load_as_slotline_yaml(block: Block, data: Any, folder: Path) -> None:
    """Load the block with slotline's loader (as a whole slotline.yaml, or as the
    settings of one agent type), or fail naming the page and the key."""
    keys = set(data) if isinstance(data, dict) else set()
    if keys and keys <= CONFIG_KEYS:
        text = block.padded()
    elif keys and keys <= AGENT_TYPE_KEYS:
        command = "" if "command" in keys else '    command: ["true"]\n'
        indented = "".join(f"    {line}" for line in block.text.splitlines(keepends=True))
        text = Block(block.page, block.line, indented).padded("agents:\n  fragment:\n" + command)
    else:
        pytest.fail(
            f"{block.page}:{block.line}: the block starting {block.first_line!r} has keys "
            f"{sorted(keys)} that are neither slotline.yaml settings nor an agent type's; "
            "fix it, or name it in NOT_SLOTLINE_YAML with the reason"
        )
    path = folder / block.page
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    store = open_store(folder / "store.db")
    try:
        # what `slotline serve` does with the file: load it, then write it into the store
        apply_config(store, load_config(path, env={}))
    except InvalidInput as exc:
        # (the error names the page's line: the file is the page's path under `folder`)
        error = str(exc).replace(f"{folder}/", "")
        pytest.fail(f"{block.page}:{block.line}: slotline does not load this block: {error}")
    finally:
        store.close()


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{b.line}" for b in BLOCKS])
def test_every_yaml_block_in_the_docs_loads(block: Block, tmp_path: Path) -> None:
    try:
        data = yaml.safe_load(block.padded())
    except yaml.YAMLError as exc:
        pytest.fail(f"{block.page}:{block.line}: not valid YAML: {exc}")
    if (block.page, block.first_line) in NOT_SLOTLINE_YAML:
        return
    load_as_slotline_yaml(block, data, tmp_path)


def test_the_docs_have_yaml_blocks_and_the_allow_list_names_only_them() -> None:
    assert len({b.page for b in BLOCKS}) >= 4, "the fence pattern finds too few pages"
    shown = {(b.page, b.first_line) for b in BLOCKS}
    assert not set(NOT_SLOTLINE_YAML) - shown, "NOT_SLOTLINE_YAML names blocks that are gone"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("agents:\n  gitlog:\n    command: [git, log, --grep={prompt}]\n", "not valid YAML"),
        ("agents:\n  claude:\n    isolation: worktree\n", "agents.claude.command"),
        ("backoff:\n  pattern: '(x'\n", "docs/page.md:12: agents.fragment.backoff.pattern"),
        ("schedules:\n  x: {cron: '0 3 * * *', task: {agent: claude, prompt: hi}}\n", "'claude'"),
        ("schedules:\n  x: {cron: every day, task: {command: [make]}}\n", "cron 'every day'"),
        ("services:\n  web: {image: nginx}\n", "neither slotline.yaml settings"),
    ],
)
def test_a_broken_block_fails_naming_its_page_and_line(
    text: str, error: str, tmp_path: Path
) -> None:
    block = Block("docs/page.md", 10, text)
    with pytest.raises(pytest.fail.Exception, match=re.escape(error)):
        test_every_yaml_block_in_the_docs_loads(block, tmp_path)
