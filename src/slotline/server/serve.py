"""Running the HTTP API with uvicorn inside the caller's event loop, until a stop event."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import socket
from collections.abc import Callable, Iterator

import uvicorn

from slotline.config.file import Config
from slotline.server.app import create_app
from slotline.server.context import ServerState
from slotline.server.guard import WILDCARD_HOSTS, host_name
from slotline.server.listen import is_loopback, open_listener
from slotline.server.options import ServerOptions
from slotline.store import Store

log = logging.getLogger("slotline.server")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


_SECRETS = re.compile(r"(?i)(token=)[^&\s\"'#]+|\bslt_[A-Za-z0-9_.\-]+")


def redact_secrets(text: str) -> str:
    """`text` with every `token=VALUE` and every `slt_…` token replaced by `***`."""
    return _SECRETS.sub(lambda m: (m.group(1) or "") + "***", text)


class RedactTokens(logging.Filter):
    """Hides tokens in uvicorn's log lines (the access log and the WebSocket lines carry
    URLs): a token sent in a URL, which the API refuses, never reaches a log either."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_secrets(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_secrets(a) if isinstance(a, str) else a for a in record.args)
        return True


def install_log_redaction() -> None:
    """Put `RedactTokens` on uvicorn's loggers (once)."""
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the caller's stop event decides when to stop
    (`slotline serve` sets it on SIGINT/SIGTERM for the node and the server alike)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_http(
    store: Store,
    config: Config | None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    stop: asyncio.Event | None = None,
    *,
    options: ServerOptions | None = None,
    on_ready: Callable[[str, int], None] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve the HTTP API on host:port until `stop` is set (forever if None).

    Args:
        store: the store the API reads and steers; the caller closes it.
        config: the effective configuration.
        host: the address to bind; a non-loopback one needs at least one token.
        port: the TCP port; 0 picks a free one (reported through `on_ready`).
        stop: set it to shut the server down gracefully.
        options: server knobs (token file, body cap, origins, stream queue size…).
        on_ready: called with the bound host and port once requests are accepted.
        sock: a socket from `open_listener(host, port)` to serve on (it is closed at
            the end); None binds one here.

    Raises:
        InvalidInput: the bind is refused (no tokens) or the address is unusable.
    """
    options = options or ServerOptions()
    if config is not None and config.auth == "none":
        options = dataclasses.replace(options, open_mode=True)
    install_log_redaction()
    if sock is None:
        sock = open_listener(host, port, options)
    if not is_loopback(host):
        options = dataclasses.replace(options, require_tokens=True)
    bound = sock.getsockname()[1]
    if host.lower() not in WILDCARD_HOSTS:  # the name it was told to listen on is its own
        named = f"{host_name(host.lower())}:{bound}"
        options = dataclasses.replace(options, allowed_hosts=(*options.allowed_hosts, named))
    app = create_app(store, config, options)
    server = _Server(
        uvicorn.Config(
            app,
            log_config=None,
            access_log=options.access_log,
            ws="websockets-sansio",
            lifespan="on",
            timeout_graceful_shutdown=5,
            ws_ping_interval=20.0,
        )
    )

    async def watch() -> None:
        while not server.started:
            await asyncio.sleep(0.01)
        log.info("HTTP API listening", extra={"host": host, "port": bound})
        if on_ready is not None:
            on_ready(host, bound)
        if stop is not None:
            await stop.wait()
            state: ServerState = app.state.slotline
            state.close_streams()
            server.should_exit = True

    watcher = asyncio.create_task(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        sock.close()
