"""`slotline serve`: run a node (scheduler and runners) until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import click

from slotline.cli.context import CliState, json_option, pass_state

if TYPE_CHECKING:
    from slotline.node import Node

LOG_LEVELS = ("debug", "info", "warning", "error")


@click.command()
@click.option(
    "--max-concurrent",
    metavar="N",
    type=click.IntRange(min=0),
    help="Set the global limit (persisted in the store) before starting.",
)
@click.option(
    "--node-id",
    metavar="NAME",
    help="This node's name; a restarted node re-adopts the runs of its name "
    "(default: the host name).",
)
@click.option(
    "--log-dir",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where attempt logs go (default: next to the SQLite file).",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS),
    default="warning",
    show_default=True,
    help="How much the node logs on stderr.",
)
@json_option
@pass_state
def serve(
    state: CliState,
    max_concurrent: int | None,
    node_id: str | None,
    log_dir: Path | None,
    log_level: str,
) -> None:
    """Run a node until Ctrl-C or SIGTERM.

    The node starts queued tasks as slots free up.
    Running commands keep running when the node stops; the next node with the same
    name re-adopts them.
    """
    from slotline.node import Node

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    store = state.store
    if max_concurrent is not None:
        store.set_setting("max_concurrent", max_concurrent)
    node = Node(store, node_id=node_id, log_dir=log_dir.resolve() if log_dir else None)
    limit = store.settings()["max_concurrent"]
    if state.json:
        click.echo(
            json.dumps(
                {
                    "node_id": node.node_id,
                    "store": store.url,
                    "max_concurrent": limit,
                    "log_dir": str(node.log_dir),
                }
            )
        )
    else:
        click.echo(
            f"slotline node {node.node_id} serving {store.url} (max_concurrent {limit}); "
            f"logs in {node.log_dir}; Ctrl-C to stop"
        )
    asyncio.run(_run(node))


async def _run(node: Node) -> None:
    from slotline.node import install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    await node.run(stop)
