"""`slotline serve`: run a node (scheduler and runners) until SIGINT or SIGTERM."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from slotline.cli.apply import apply_config
from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.numbers import Number, seconds, whole
from slotline.config import settings as table
from slotline.errors import SlotlineError
from slotline.runner.env import allow_list
from slotline.worktrees.isolate import SWEEP_INTERVAL

if TYPE_CHECKING:
    from slotline.config.file import Config
    from slotline.node.node import Node
    from slotline.runner.callable import Entry
    from slotline.server.options import ServerOptions

log = logging.getLogger("slotline.serve")
LOG_LEVELS = ("debug", "info", "warning", "error")


@click.command()
@click.option(
    "--max-concurrent",
    metavar="N",
    type=Number(table.bounds("max_concurrent")),
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
    help="slotline.yaml to use (default: $SLOTLINE_CONFIG, else slotline.yaml here or in the "
    "nearest folder above, else $XDG_CONFIG_HOME/slotline/slotline.yaml, else none).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address of the HTTP API; beyond loopback, tokens are required.",
)
@click.option("--port", type=whole(0, 65535), default=8765, show_default=True)
@click.option("--no-http", is_flag=True, help="Run the node without the HTTP API.")
@click.option(
    "--no-auth",
    is_flag=True,
    help="Open mode: every caller of the HTTP API is admin, even once tokens have existed "
    "(loopback only; same as `auth: none` in slotline.yaml).",
)
@click.option(
    "--access-log",
    is_flag=True,
    help="Log every HTTP request at info level (tokens in URLs are redacted).",
)
@click.option(
    "--slots",
    metavar="N",
    type=Number(table.bounds("slots")),
    help="Run at most N tasks on this node, beside the global and per-key limits "
    "(default: no cap of its own; `slots:` in slotline.yaml).",
)
@click.option(
    "--lease",
    metavar="SECONDS",
    type=Number(table.bounds("lease")),
    help="How long this node's runs stay its own without a heartbeat; another node of "
    f"the store finishes them after that (default: {table.default('lease'):g}; `lease:` in "
    "slotline.yaml).",
)
@click.option(
    "--sweep-interval",
    metavar="SECONDS",
    type=seconds(0, 86_400),
    default=SWEEP_INTERVAL,
    show_default=True,
    help="How often the node sweeps its worktrees and applies their retention policy, "
    "besides when a run's worktree closes and at its start (0: only then).",
)
@click.option(
    "--sample-interval",
    metavar="SECONDS",
    type=seconds(0, 3600),
    default=10.0,
    show_default=True,
    help="How often the line is sampled for the dashboard's charts (0: never).",
)
@click.option(
    "--app",
    "app_refs",
    metavar="MODULE:APP",
    multiple=True,
    help="Run the Python functions declared on this slotline.App (e.g. agents:app; the "
    "module is imported from the current folder or the Python path). Repeatable.",
)
@click.option(
    "--env-allow",
    metavar="NAME",
    multiple=True,
    help="Pass this environment variable of the node on to runs (beside the base "
    "allow-list; also `env_allow:` in slotline.yaml, $SLOTLINE_ENV_ALLOW). Repeatable.",
)
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
    no_auth: bool,
    access_log: bool,
    slots: int | None,
    lease: float | None,
    sweep_interval: float,
    sample_interval: float,
    app_refs: tuple[str, ...],
    env_allow: tuple[str, ...],
) -> None:
    """Run a node until Ctrl-C or SIGTERM.

    The node starts queued tasks as slots free up.
    Running commands keep running when the node stops; the next node with the same
    name re-adopts them. With --app, it also runs the app's Python functions (they
    cannot outlive the node: a stop interrupts them).
    """
    from slotline.cli.logfmt import configure as configure_logging
    from slotline.config.file import load_config, warn_no_slots
    from slotline.node.node import Node
    from slotline.server.listen import open_listener
    from slotline.server.options import ServerOptions

    if state.url is not None:
        raise click.UsageError(
            f"serve runs a node on a store, not through a server ({state.url}): "
            "give --store (and unset SLOTLINE_URL)"
        )
    configure_logging(log_level, log_format)
    config = load_config(
        config_path or state.config_path,
        overrides={
            "max_concurrent": max_concurrent,
            "auth": "none" if no_auth else None,
            "slots": slots,
            "lease": lease,
            "env_allow": [*env_allow] or None,
        },
    )
    if state.store_url is None and config.store:
        state.store_url = config.store
    functions = serve_apps(state, app_refs)
    # The port first: a node that cannot serve its API stops before it changes anything.
    options = ServerOptions(access_log=access_log, open_mode=config.auth == "none")
    sock = None if no_http else open_listener(host, port, options)
    store = state.local_store
    applied = apply_config(store, config)
    warn_about_agents(config)
    node = Node(
        store,
        node_id=node_id,
        log_dir=log_dir.resolve() if log_dir else None,
        kill_grace=config.kill_grace,
        log_max_bytes=config.log_max_bytes,
        keep_awake=config.keep_awake,
        env_allow=allow_list(config.env_allow),
        admission=config.admission,
        lease=config.lease,
        slots=config.slots,
        sample_interval=sample_interval,
        sweep_interval=sweep_interval,
        callables=functions,
        worktree_policy=config.worktree_policy(),
        agents=config.agents,
        config=config,
    )
    if sock is not None:
        # Known once bound: the first runs, started before the server is up (see `_run`),
        # reach it too (their requests wait in the port's backlog until it answers).
        node.api_url = local_url(host, sock.getsockname()[1])
    limit = store.settings()["max_concurrent"]
    if limit == 0 and config.max_concurrent != 0:  # (a file that sets it was said already)
        warn_no_slots("the store's setting")
    if state.json:
        info = {
            "node_id": node.node_id,
            "store": store.url,
            "max_concurrent": limit,
            "slots": node.slots,
            "lease": node.lease,
            "log_dir": str(node.log_dir),
            "config": applied,
            "functions": sorted(functions),
        }
        click.echo(json.dumps(info))
    else:
        count = len(functions)
        served = f"; {count} Python function{'s' * (count != 1)}" if functions else ""
        click.echo(
            f"slotline node {node.node_id} serving {store.url} (max_concurrent {limit}"
            f"{served}); logs in {node.log_dir}; Ctrl-C to stop",
        )

    def ready(bound_host: str, bound_port: int) -> None:
        url = f"http://{bound_host}:{bound_port}"
        node.api_url = local_url(bound_host, bound_port)
        shown = local_url(bound_host, bound_port)
        click.echo(
            json.dumps({"http": url, "dashboard": f"{shown}/"})
            if state.json
            else f"HTTP API at {url} (OpenAPI docs at {url}/docs); dashboard at {shown}/"
        )

    # `/readyz` says 503 while a full disk keeps the node's logs (or the store) unwritten.
    sqlite = getattr(store, "path", None)
    space = (node.log_dir, *((sqlite.parent,) if isinstance(sqlite, Path) else ()))
    options = dataclasses.replace(options, space_dirs=space)
    asyncio.run(_run(node, config, None if sock is None else (host, port, sock), ready, options))


def warn_about_agents(config: Config) -> None:
    """A warning per agent type that cannot run as configured (its binary is missing, a
    variable it needs is not set); the node starts anyway. No dry runs: they would
    delay every start by up to their timeout, and `slotline agents check` makes them."""
    from slotline.runner.preflight import Level, check_agents

    for finding in check_agents(config.agents, config.env_allow, probe=False):
        if finding.level is not Level.OK:
            log.warning(
                "agent type %s: %s: %s (see `slotline agents check`)",
                finding.agent, finding.check, finding.detail, extra={"agent": finding.agent},
            )  # fmt: skip


def serve_apps(state: CliState, references: tuple[str, ...]) -> dict[str, Entry]:
    """The functions of the apps named by `--app`, by task name. An app's store is served
    when none is given; an app of another store than the one served is refused (its
    tasks would never be seen)."""
    from slotline.api.app import load_app

    functions: dict[str, Entry] = {}
    for reference in references:
        try:
            app = load_app(reference)
        except SlotlineError as exc:
            raise click.UsageError(str(exc)) from exc
        if app.store_url is not None:
            if state.store_url is None:
                state.store_url = str(app.store_url)
            elif _same_store(state.store_url) != _same_store(str(app.store_url)):
                raise click.UsageError(
                    f"{reference} submits to {app.store_url}, not to the store served "
                    f"({state.store_url}): give the same --store, or none"
                )
        for name, entry in app.entries().items():
            if name in functions:
                raise click.UsageError(f"two apps declare a task named {name!r}")
            functions[name] = entry
    return functions


def _same_store(url: str) -> str:
    """A store URL in a form that two spellings of one SQLite file share."""
    if "://" in url and not url.startswith("sqlite://"):
        return url
    return str(Path(url.removeprefix("sqlite://")).expanduser().resolve())


def local_url(host: str, port: int) -> str:
    """The URL of the HTTP API for a process on this machine (a run of this node): a
    wildcard bind is reached on loopback."""
    if host in ("", "0.0.0.0"):  # noqa: S104 - a name, not a bind
        host = "127.0.0.1"
    elif host in ("::", "[::]"):
        host = "::1"
    name = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{name}:{port}"


async def _run(
    node: Node,
    config: Config,
    http: tuple[str, int, socket.socket] | None,
    on_ready: Callable[[str, int], None],
    options: ServerOptions,
) -> None:
    from slotline.node.node import install_signal_handlers

    stop = asyncio.Event()
    install_signal_handlers(stop)
    jobs = [asyncio.create_task(node.run(stop)), *_hear(node, config, stop)]
    if http is not None:
        jobs.append(
            asyncio.create_task(
                _serve_http_after_first_claim(node, config, http, stop, on_ready, options)
            )
        )
    try:
        for done in asyncio.as_completed(jobs):
            await done  # the first to fail (e.g. the port is taken) stops the rest
    finally:
        stop.set()
        await asyncio.gather(*jobs, return_exceptions=True)


async def _serve_http_after_first_claim(
    node: Node,
    config: Config,
    http: tuple[str, int, socket.socket],
    stop: asyncio.Event,
    on_ready: Callable[[str, int], None],
    options: ServerOptions,
) -> None:
    """Serve the HTTP API once the node's first claim is done: importing the server
    (FastAPI, uvicorn, MCP: about a second) must not hold back the first starts. The
    import runs in a thread, beside the runs the node supervises meanwhile; the port is
    bound already, so early requests wait in its backlog."""
    host, port, sock = http
    waits = [asyncio.ensure_future(node.dispatched.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    serve_http = None if stop.is_set() else await asyncio.to_thread(_import_server)
    if serve_http is None or stop.is_set():  # stopped before it served
        sock.close()
        return
    await serve_http(
        node.store, config, host, port, stop=stop, options=options, on_ready=on_ready, sock=sock
    )


def _import_server() -> Callable[..., Awaitable[None]]:
    from slotline.server.serve import serve_http

    return serve_http


def _hear(node: Node, config: Config, stop: asyncio.Event) -> list[asyncio.Task[None]]:
    """The node's hooks (`notify`, `on_event`), its watch for stalled runs and the one
    for interactive runs that need input, each in a task of its own beside the dispatch
    loop."""
    from slotline.node.needs_input import DEFAULT_IDLE_AFTER, InputRule, InputWatch
    from slotline.node.stall import StallWatch

    rules = {name: agent.stall for name, agent in config.agents.items() if agent.stall}
    watch = StallWatch(node.supervisor, rules)
    input_rules = {
        name: InputRule(agent.idle_after or DEFAULT_IDLE_AFTER, agent.release_while_idle)
        for name, agent in config.agents.items()
        if agent.interactive
    }
    inputs = InputWatch(node.supervisor, input_rules)
    jobs = [asyncio.create_task(watch.run(stop)), asyncio.create_task(inputs.run(stop))]
    if config.notify or config.on_event:  # else no hook: no HTTP client to import
        from slotline.webhooks.deliver import deliver_until

        hooks = deliver_until(
            stop, node.store, node.node_id, config.notify, config.on_event, node.log_dir,
            node.lease, node.supervisor.settings.env_allow,
        )  # fmt: skip
        jobs.append(asyncio.create_task(hooks))
    return jobs
