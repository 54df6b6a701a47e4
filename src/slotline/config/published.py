"""A node's configuration as it publishes it to its store, and what clients on that store
make of it: the agent type to build a task from when their own slotline.yaml lacks it
(or differs), and where their configuration differs from the node's.

A client on the store (the CLI, MCP on stdio, the Python API) may run anywhere, with or
without a slotline.yaml: it builds an agent type's task from its own file when that file
declares the type, else from what a live node published (the latest published, when
several nodes serve a type). A client through a server (`--url`) needs none of this: the
server builds the task from its own types.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pydantic

from slotline.config.agent_types import AgentType
from slotline.config.file import Config, redacted
from slotline.errors import InvalidInput

if TYPE_CHECKING:
    from slotline.store import PublishedConfig, Store

# Keys of the configuration a node does not publish among its settings: the store (they
# share it; its URL may hold a password), its agent types (published apart), its
# schedules (in the store already, and a schedule's task may carry env values), and its
# webhooks and hooks (URLs and secrets).
UNPUBLISHED = frozenset({"store", "agents", "schedules", "notify", "on_event"})


def publication(config: Config) -> dict[str, Any]:
    """What a node publishes of `config` (`Store.publish_config`'s arguments): the file it
    read (absolute; None: none), its agent types and its settings."""
    source = None if config.source is None else os.path.abspath(config.source)
    return {
        "source": source,
        "agents": published_agents(config),
        "settings": published_settings(config),
    }


def published_agents(config: Config) -> dict[str, dict[str, Any]]:
    """The agent types as a node publishes them: each as slotline.yaml would give it, its
    defaults left out (the environment variables it takes are names, never values)."""
    return {name: _agent_json(agent) for name, agent in config.agents.items()}


def published_settings(config: Config) -> dict[str, Any]:
    """The settings a node publishes beside its agent types: the effective configuration
    but for `UNPUBLISHED`."""
    data = redacted(config, admin=False)
    return {key: value for key, value in data.items() if key not in UNPUBLISHED}


def _agent_json(agent: AgentType) -> dict[str, Any]:
    return agent.model_dump(mode="json", exclude_defaults=True)


@dataclass(frozen=True)
class Offer:
    """An agent type a live node serves: the node's name, and a configuration holding
    that type and the node's `worktrees.keep` (the default of its worktree tasks), from
    which a client builds the task the node would (None: this version of slotline cannot
    read what the node published, `problem` says why)."""

    node_id: str
    config: Config | None
    problem: str = ""


def offers(published: Sequence[PublishedConfig]) -> dict[str, Offer]:
    """Each agent type live nodes serve, as the latest node to publish it gave it
    (`published` is the latest first, as `Store.published_configs` returns it)."""
    found: dict[str, Offer] = {}
    for node in published:
        keep = (node.settings.get("worktrees") or {}).get("keep")
        worktrees = {} if keep is None else {"keep": keep}
        for name, data in node.agents.items():
            if name in found:
                continue
            try:
                config = Config.model_validate({"agents": {name: data}, "worktrees": worktrees})
            except pydantic.ValidationError as exc:
                problem = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
                )
                found[name] = Offer(node.node_id, None, problem)
            else:
                found[name] = Offer(node.node_id, config)
    return found


def agent_config(
    local: Config,
    published: Sequence[PublishedConfig],
    name: str,
    warn: Callable[[str], None] | None = None,
) -> Config:
    """The configuration to build a task of agent type `name` from: the local one when it
    declares the type (with a warning through `warn` when the type a live node serves
    differs from it), else one holding the type a live node published (with that node's
    `worktrees.keep`), so the task is the one that node would build.

    Raises:
        InvalidInput: neither declares `name` (the message names the types each has),
            or a node published it in a form this version of slotline cannot read.
    """
    served = offers(published)
    offer = served.get(name)
    if name in local.agents:
        if warn is not None and offer is not None and offer.config is not None:
            mine, theirs = local.agents[name], offer.config.agents[name]
            fields = _differing(_agent_json(mine), _agent_json(theirs), depth=0)
            if fields:
                where = local.source or "the local configuration"
                warn(
                    f"agent type {name!r} of {where} differs from the one node "
                    f"{offer.node_id} serves ({', '.join(fields)}); this task uses {where}'s"
                )
        return local
    if offer is None:
        raise InvalidInput(f"unknown agent type {name!r} (known: {_known(local, served)})")
    if offer.config is None:
        raise InvalidInput(
            f"agent type {name!r} as node {offer.node_id} serves it cannot be read by this "
            f"version of slotline ({offer.problem}); upgrade it, or submit with --url"
        )
    return offer.config


def store_agent_config(
    store: Store, local: Config, name: str, warn: Callable[[str], None] | None = None
) -> Config:
    """`agent_config` with what the live nodes of `store` published."""
    return agent_config(local, store.published_configs(), name, warn)


def _known(local: Config, served: Mapping[str, Offer]) -> str:
    """The agent types a client on the store knows, for an error: its own, then those
    live nodes serve."""
    mine = ", ".join(sorted(local.agents))
    theirs = ", ".join(sorted(set(served) - set(local.agents)))
    if not theirs:
        return mine or "none are configured, and no running node serves any"
    return f"{mine or 'none in the local configuration'}; served by running nodes: {theirs}"


def differences(local: Config, published: PublishedConfig) -> list[str]:
    """Where the local configuration differs from what a node published: the keys
    (`max_concurrent`, `agents.claude.max_concurrent`, `agents.codex` for a type only
    one of them has), sorted."""
    theirs: dict[str, Any] = {}
    for name, data in published.agents.items():
        try:
            theirs[name] = _agent_json(AgentType.model_validate(data))
        except pydantic.ValidationError:
            theirs[name] = data  # unreadable here: different whatever the local file says
    mine = published_agents(local)
    found = _differing(mine, theirs, "agents.")
    found += _differing(published_settings(local), published.settings)
    return sorted(found)


def _differing(
    mine: Mapping[str, Any], theirs: Mapping[str, Any], prefix: str = "", depth: int = 1
) -> list[str]:
    """The keys whose values differ, `depth` levels into values that are objects on both
    sides (`admission.max_cpu_percent`); a key only one side has counts as differing."""
    found = []
    for key in sorted(set(mine) | set(theirs)):
        a, b = mine.get(key), theirs.get(key)
        if a == b and (key in mine) == (key in theirs):
            continue
        if isinstance(a, dict) and isinstance(b, dict) and depth > 0:
            found += _differing(a, b, f"{prefix}{key}.", depth - 1)
        else:
            found.append(f"{prefix}{key}")
    return found
