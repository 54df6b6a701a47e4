"""The environment a run gets: an agent type's `env_required` and `env_allow` add to the
node's, for its runs alone."""

from __future__ import annotations

from pathlib import Path

from slotline.config.agent_types import AgentType
from slotline.node.run import RunSettings
from slotline.runner.callable import Registry
from slotline.runner.env import BASE_ALLOW, allow_list, build_env
from slotline.store import open_store

NODE_ENV = {
    "PATH": "/usr/bin",
    "ANTHROPIC_API_KEY": "sk-ant",
    "OPENAI_API_KEY": "sk-oai",
    "AWS_REGION": "eu",
    "NODE_SECRET": "s",
}


def test_each_agent_type_gets_its_own_variables_and_no_other_types(tmp_path: Path) -> None:
    agents = {
        "claude": AgentType(
            command=["claude"], env_required=["ANTHROPIC_API_KEY"], env_allow=["AWS_*"]
        ),
        "aider": AgentType(command=["aider"], env_allow=["OPENAI_API_KEY"]),
        "plain": AgentType(command=["true"]),
    }
    settings = RunSettings(
        log_dir=tmp_path, registry=Registry(), kill_grace=1, lease=30,
        env_allow=BASE_ALLOW, api_url=None, log_max_bytes=1024, agents=agents,
    )  # fmt: skip
    with open_store(tmp_path / "s.db") as store:
        store.set_setting("max_concurrent", 5)
        for agent in ("claude", "aider", "plain", "gone"):
            store.submit({"command": ["true"], "agent": agent})
        store.submit({"command": ["true"]})
        claims = store.claim("n", limit=5).claims
    seen = {}
    for claim in claims:
        allow = settings.env_allow_of(claim.task)
        env = build_env(claim.task, claim.attempt, "", base=NODE_ENV, allow=allow)
        seen[claim.task.agent] = {name for name in NODE_ENV if name in env}
    assert seen == {
        "claude": {"PATH", "ANTHROPIC_API_KEY", "AWS_REGION"},
        "aider": {"PATH", "OPENAI_API_KEY"},
        "plain": {"PATH"},
        "gone": {"PATH"},  # a type this node does not know gets the base list
        None: {"PATH"},
    }


def test_the_allow_list_of_a_run_names_each_variable_once() -> None:
    claude = AgentType(command=["claude"], env_required=["KEY"], env_allow=["KEY", "HOME"])
    node = allow_list(["EXTRA", "PATH"])
    assert node == (*BASE_ALLOW, "EXTRA")
    # The node's list given again (as a node keeps it) adds nothing twice.
    assert allow_list(node, claude) == (*BASE_ALLOW, "EXTRA", "KEY")
    assert allow_list(node, None) == node
