"""`slotline serve`: run a node (scheduler and runners) until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from slotline.cli.context import CliState, json_option, pass_state
from slotline.runner.env import BASE_ALLOW

if TYPE_CHECKING:
    from slotline.config import Config
    from slotline.node import Node
    from slotline.store import Store

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
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one object per line with the structured fields (task_id, node…).",
)
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="slotline.yaml to use (default: $SLOTLINE_CONFIG, else ./slotline.yaml if present).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address of the HTTP API; beyond loopback, tokens are required.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--no-http", is_flag=True, help="Run the node without the HTTP API.")
@json_option
@pass_state
def serve(
    state: CliState,
    max_concurrent: int | None,
    node_id: str | None,
    log_dir: Path | None,
    log_level: str,
    log_format: str,
    config_path: Path | None,
    host: str,
    port: int,
    no_http: bool,
) -> None:
    """Run a node until Ctrl-C or SIGTERM.

    The node starts queued tasks as slots free up.
    Running commands keep running when the node stops; the next node with the same
    name re-adopts them.
    """
    from slotline.config import load_config
    from slotline.logfmt import configure as configure_logging
    from slotline.node import Node

    if state.url is not None:
        raise click.UsageError(
            f"serve runs a node on a store, not through a server ({state.url}): "
            "give --store (and unset SLOTLINE_URL)"
        )
    configure_logging(log_level, log_format)
    config = load_config(
        config_path or state.config_path, overrides={"max_concurrent": max_concurrent}
    )
    if state.store_url is None and config.store:
        state.store_url = config.store
    store = state.local_store
    applied = apply_config(store, config)
    node = Node(
        store,
        node_id=node_id,
        log_dir=log_dir.resolve() if log_dir else None,
        kill_grace=config.kill_grace,
        log_max_bytes=config.log_max_bytes,
        env_allow=(*BASE_ALLOW, *config.env_allow),
        admission=config.admission,
    )
    limit = store.settings()["max_concurrent"]
    if state.json:
        info = {
            "node_id": node.node_id,
            "store": store.url,
            "max_concurrent": limit,
            "log_dir": str(node.log_dir),
            "config": applied,
        }
        click.echo(json.dumps(info))
    else:
        click.echo(
            f"slotline node {node.node_id} serving {store.url} (max_concurrent {limit}); "
            f"logs in {node.log_dir}; Ctrl-C to stop",
        )

    def ready(bound_host: str, bound_port: int) -> None:
        url = f"http://{bound_host}:{bound_port}"
        click.echo(
            json.dumps({"http": url})
            if state.json
            else f"HTTP API at {url} (OpenAPI docs at {url}/docs)"
        )

    asyncio.run(_run(node, config, None if no_http else (host, port), ready))


def apply_config(store: Store, config: Config) -> str | None:
    """Write the configuration's settings and limits into the store; returns the file used.

    What the file (or SLOTLINE_* / flags) sets wins over what the store holds; limits from
    the file are added to those set at runtime with `slotline limits`.
    """
    given = config.model_fields_set
    for name in ("max_concurrent", "aging_interval", "max_depth", "max_children", "max_queue_size"):
        if name in given:
            store.set_setting(name, getattr(config, name))
    for limit in config.limits:
        store.set_limit(limit.key, limit.value, limit.max)
    for name, agent in config.agents.items():
        if agent.max_concurrent is not None:
            store.set_limit("agent", name, agent.max_concurrent)
    exempt = sorted(name for name, agent in config.agents.items() if not agent.global_pool)
    if exempt or "agents" in given:
        store.set_exempt_agents(exempt)
    return config.source


async def _run(
    node: Node,
    config: Config,
    http: tuple[str, int] | None,
    on_ready: Callable[[str, int], None],
) -> None:
    from slotline.node import install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    jobs = [asyncio.create_task(node.run(stop))]
    if http is not None:
        from slotline.server.serve import serve_http

        jobs.append(
            asyncio.create_task(serve_http(node.store, config, *http, stop=stop, on_ready=on_ready))
        )
    try:
        for done in asyncio.as_completed(jobs):
            await done  # the first to fail (e.g. the port is taken) stops the rest
    finally:
        stop.set()
        await asyncio.gather(*jobs, return_exceptions=True)
