"""A node's registration on its store: one live node per id, then what it serves
published (its functions, and its configuration, from which clients anywhere on the
store build its agent types' tasks)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable

from slotline.clock import utcnow
from slotline.config.file import Config
from slotline.config.published import publication
from slotline.errors import InvalidInput
from slotline.runner.process import process_start_time
from slotline.store import Store


def register(
    store: Store, node_id: str, lease: float, functions: Iterable[str], config: Config | None
) -> float:
    """Register node `node_id`, refusing while another live node has this id (it would
    reconcile and signal this node's runs as its own); then publish what it serves.
    Returns the skew of the store's clock against this machine's.

    Raises:
        InvalidInput: another node of that id is alive (here, or heartbeating elsewhere).
    """
    row = store.node(node_id)
    skew = store.clock() - utcnow()
    if row is not None and float(row["heartbeat_at"]) > utcnow() + skew - lease:
        here = row["host"] == socket.gethostname()
        itself = here and row["pid"] == os.getpid()
        alive = here and _running_since(int(row["pid"]), float(row["started_at"]))
        if not itself and (alive or not here):
            raise InvalidInput(
                f"another node named {node_id!r} is running (pid {row['pid']} on "
                f"{row['host']}); stop it, or give this one another --node-id"
            )
    store.register_node(node_id)
    store.serve_functions(node_id, functions)
    if config is not None:
        store.publish_config(node_id, **publication(config))
    return skew


def _running_since(pid: int, since: float) -> bool:
    """True if process `pid` exists and already existed at `since` (not a reused pid)."""
    started = process_start_time(pid)
    return started is not None and started <= since + 1.0
