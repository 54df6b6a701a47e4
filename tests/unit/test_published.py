"""What a node publishes of its configuration, and how a client on the store builds an
agent type's task from it: the same task as the node's, without a secret on the way."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slotline.api.queue import Queue
from slotline.config.file import Config, load_config
from slotline.config.published import agent_config, differences, publication
from slotline.config.templates import expand_agent_type
from slotline.errors import InvalidInput
from slotline.mcp.calls import BackendCalls
from slotline.store import PublishedConfig, Store, open_store
from unit.test_docs_yaml import PAGES, yaml_blocks

NODE_YAML = """\
store: postgresql://slotline:hunter2@db.example.com/queue
max_concurrent: 4
worktrees: {keep: always}
agents:
  claude:
    command: [claude, -p, --permission-mode, acceptEdits, --, "{prompt}"]
    env_required: [ANTHROPIC_API_KEY]
    env_allow: ["AWS_*"]
    max_concurrent: 2
    timeout: 3600
    isolation: worktree
notify:
  - {url: "https://hooks.example.com/T0/B0/s3cr3t-path", secret: whsecret, events: [task.failed]}
on_event: {task.failed: [[notify-send, --, "{title}"]]}
schedules:
  nightly:
    cron: "0 3 * * *"
    task: {command: [make, nightly], env: {DEPLOY_TOKEN: tok-value}}
"""


def node_config(tmp_path: Path, text: str = NODE_YAML, name: str = "node.yaml") -> Config:
    path = tmp_path / name
    path.write_text(text)
    return load_config(path, env={})


def published(config: Config, node: str = "box1", at: float = 1.0) -> PublishedConfig:
    """`config` as node `node` publishes it and a client then reads it (JSON both ways)."""
    data = json.loads(json.dumps(publication(config)))
    return PublishedConfig(node, data["source"], data["agents"], data["settings"], at)


def test_a_node_publishes_names_and_templates_never_a_secret(tmp_path: Path) -> None:
    config = node_config(tmp_path)
    data = publication(config)
    text = json.dumps(data)
    for secret in ("hunter2", "s3cr3t", "whsecret", "tok-value", "hooks.example.com"):
        assert secret not in text
    assert data["source"] == str(tmp_path / "node.yaml")
    claude = data["agents"]["claude"]
    assert claude["env_required"] == ["ANTHROPIC_API_KEY"]
    assert claude["env_allow"] == ["AWS_*"]
    assert data["settings"]["max_concurrent"] == 4
    assert data["settings"]["worktrees"]["keep"] == "always"
    assert not {"store", "agents", "notify", "on_event", "schedules"} & set(data["settings"])


def agent_types_of_the_docs() -> list[tuple[str, dict[str, Any]]]:
    """Every agent type in the docs' slotline.yaml blocks that loads."""
    import yaml

    found = []
    for page in PAGES:
        for block in yaml_blocks(page):
            data = yaml.safe_load(block.text)
            if isinstance(data, dict) and isinstance(data.get("agents"), dict):
                found += [(f"{block.page}:{block.line}:{n}", a) for n, a in data["agents"].items()]
    return found


@pytest.mark.parametrize(("where", "agent"), agent_types_of_the_docs())
def test_a_published_type_builds_the_task_the_node_would(where: str, agent: dict[str, Any]) -> None:
    # Given a node serving one of the docs' agent types, and a client with no file
    try:
        served = Config.model_validate({"agents": {"t": agent}, "worktrees": {"keep": "always"}})
    except ValueError:
        pytest.skip(f"{where}: not a whole agent type")
    here = Config()
    fields = {"agent": "t", "workspace": "/work/app", "title": "a title", "user": "me"}
    # When the client builds the task from what the node published
    built = expand_agent_type(agent_config(here, [published(served)], "t"), fields, "fix it")
    # Then it is the task the node builds from its own file
    assert built == expand_agent_type(served, fields, "fix it")


def test_the_local_type_wins_and_a_difference_is_said_in_one_line(tmp_path: Path) -> None:
    node = published(node_config(tmp_path))
    local = node_config(tmp_path, NODE_YAML.replace("max_concurrent: 2", "max_concurrent: 1"))
    heard: list[str] = []
    assert agent_config(local, [node], "claude", heard.append) is local
    (said,) = heard
    assert "\n" not in said
    assert said == (
        f"agent type 'claude' of {tmp_path / 'node.yaml'} differs from the one node box1 "
        f"serves (max_concurrent); this task uses {tmp_path / 'node.yaml'}'s"
    )
    # The same type on both sides: nothing to say.
    heard.clear()
    assert agent_config(node_config(tmp_path), [node], "claude", heard.append) is not None
    assert heard == []


def test_the_latest_node_to_publish_a_type_is_the_one_used(tmp_path: Path) -> None:
    older = published(node_config(tmp_path), "old", at=1.0)
    newer_yaml = NODE_YAML.replace("timeout: 3600", "timeout: 60")
    newer = published(node_config(tmp_path, newer_yaml, "newer.yaml"), "new", at=2.0)
    # `Store.published_configs` gives the latest first.
    config = agent_config(Config(), [newer, older], "claude")
    assert config.agents["claude"].timeout == 60
    assert config.worktrees.keep is not None
    assert config.worktrees.keep.value == "always"


def test_an_unknown_type_names_the_known_ones_of_both(tmp_path: Path) -> None:
    node = published(node_config(tmp_path))
    local = Config.model_validate({"agents": {"mine": {"command": ["x", "{prompt}"]}}})
    with pytest.raises(InvalidInput) as both:
        agent_config(local, [node], "nope")
    assert str(both.value) == (
        "unknown agent type 'nope' (known: mine; served by running nodes: claude)"
    )
    with pytest.raises(InvalidInput) as theirs:
        agent_config(Config(), [node], "nope")
    assert "none in the local configuration; served by running nodes: claude" in str(theirs.value)
    with pytest.raises(InvalidInput) as none:
        agent_config(Config(), [], "nope")
    assert str(none.value) == (
        "unknown agent type 'nope' (known: none are configured, and no running node serves any)"
    )


def test_a_type_this_version_cannot_read_is_refused_saying_so() -> None:
    future = {"command": ["claude", "{prompt}"], "sandbox": "strict"}
    node = PublishedConfig("box1", None, {"claude": future}, {}, 1.0)
    with pytest.raises(InvalidInput, match=r"cannot be read by this version.*sandbox"):
        agent_config(Config(), [node], "claude")


def test_differences_are_the_keys_that_differ(tmp_path: Path) -> None:
    node = published(node_config(tmp_path))
    assert differences(node_config(tmp_path), node) == []
    local = (
        NODE_YAML.replace("max_concurrent: 4", "max_concurrent: 5")
        .replace("timeout: 3600", "timeout: 60")
        .replace("isolation: worktree\n", "isolation: worktree\n  codex: {command: [codex]}\n")
    )
    assert differences(node_config(tmp_path, local), node) == [
        "agents.claude.timeout",
        "agents.codex",
        "max_concurrent",
    ]
    assert differences(Config(), node) == [
        "agents.claude",
        "max_concurrent",
        "worktrees.keep",
    ]


RESUMABLE = """\
agents:
  claude:
    command: [claude, -p, --output-format, json, --, "{prompt}"]
    resume: [claude, -p, --resume, "{session_id}", --, "{prompt}"]
    usage: {json: {session_id: session_id}}
"""


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(tmp_path / "store.db")
    yield opened
    opened.close()


def serve(store: Store, config: Config, node: str = "box1") -> None:
    """What `slotline serve` does for a node with `config`, as far as clients see."""
    store.register_node(node)
    store.publish_config(node, **publication(config))


def test_a_follow_up_on_the_store_takes_the_type_a_running_node_published(
    store: Store, tmp_path: Path
) -> None:
    # Given a running node serving a resumable type, and a task of that type in line
    serve(store, node_config(tmp_path, RESUMABLE))
    followed = store.submit({"agent": "claude", "command": ["claude", "-p", "first"]})
    # When a client without a configuration of its own follows it up
    task = asyncio.run(Queue(store).followup(followed.id, "and the docs", config=Config()))
    # Then the follow-up is the type's resume template, filled
    assert task.command[:3] == ("claude", "-p", "--resume")
    assert task.command[-2:] == ("--", "and the docs")
    assert task.depends_on == (followed.id,)


def test_mcp_on_the_store_submits_a_published_type_and_says_when_its_own_differs(
    store: Store, tmp_path: Path
) -> None:
    serve(store, node_config(tmp_path, RESUMABLE))
    calls = BackendCalls(store, Config(), None)
    built = asyncio.run(calls.submit({"agent": "claude", "prompt": "fix it"}))
    assert built["command"][-2:] == ["--", "fix it"]
    assert "warning" not in built
    own = RESUMABLE + "    timeout: 60\n"
    local = node_config(tmp_path, own, "own.yaml")
    calls = BackendCalls(store, local, None)
    built = asyncio.run(calls.submit({"agent": "claude", "prompt": "fix it"}))
    assert built["timeout"] == 60
    assert "node box1 serves (timeout)" in built["warning"]
