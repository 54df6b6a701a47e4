"""What nodes publish of their configuration (agent types, settings, the file they read),
and what clients on the store read of it: the live nodes', the latest first (every
backend)."""

from __future__ import annotations

from typing import Any

from slotline.store import LEASE_SECONDS, Store

CLAUDE = {"command": ["claude", "-p", "--", "{prompt}"], "env_required": ["ANTHROPIC_API_KEY"]}


def publish(store: Store, node: str, source: str | None = None, **agents: Any) -> None:
    store.publish_config(node, source, agents, {"max_concurrent": 3})


def test_a_node_publishes_its_configuration_and_clients_read_it_while_it_runs(
    store: Store,
) -> None:
    # Given a node that registered and published its agent types and the file it read
    store.register_node("n1")
    before = store.clock()
    published = store.publish_config(
        "n1", "/home/me/app/slotline.yaml", {"claude": CLAUDE}, {"max_concurrent": 2}
    )
    # Then a client of the store reads them back as published, with when (store clock)
    (read,) = store.published_configs()
    assert read == published
    assert (read.node_id, read.source) == ("n1", "/home/me/app/slotline.yaml")
    assert read.agents == {"claude": CLAUDE}
    assert read.settings == {"max_concurrent": 2}
    assert before <= read.published_at <= store.clock()
    assert [e.kind for e in store.events()][-1] == "config_published"
    # And once the node stops, it serves nothing more
    store.unregister_node("n1")
    assert store.published_configs() == []


def test_each_node_publishes_its_own_and_the_latest_comes_first(store: Store) -> None:
    for node in ("n1", "n2"):
        store.register_node(node)
    publish(store, "n1", "/a/slotline.yaml", claude=CLAUDE)
    publish(store, "n2", None, codex={"command": ["codex", "{prompt}"]})
    assert [p.node_id for p in store.published_configs()] == ["n2", "n1"]
    # Publishing again replaces what that node said before, and makes it the latest.
    publish(store, "n1", "/b/slotline.yaml", claude={**CLAUDE, "max_concurrent": 1})
    first, second = store.published_configs()
    assert (first.node_id, first.source, second.node_id) == ("n1", "/b/slotline.yaml", "n2")
    assert first.agents["claude"]["max_concurrent"] == 1
    assert second.source is None


def test_a_node_that_stopped_heartbeating_or_started_again_serves_nothing_old(
    store: Store,
) -> None:
    # A node whose last heartbeat is older than a lease is not read.
    store.register_node("gone", now=store.clock() - 2 * LEASE_SECONDS)
    publish(store, "gone", claude=CLAUDE)
    assert store.published_configs() == []
    store.heartbeat("gone")
    assert [p.node_id for p in store.published_configs()] == ["gone"]
    # A node registering again forgets what it published in its earlier life (until it
    # publishes again).
    store.register_node("gone")
    assert store.published_configs() == []
