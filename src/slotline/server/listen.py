"""Binding the HTTP API's port, and whether an address may be bound: a module without
FastAPI or uvicorn, so that `slotline serve` binds its port (and fails early if it cannot)
before it imports the server."""

from __future__ import annotations

import ipaddress
import socket

from slotline.errors import InvalidInput
from slotline.server.auth import TokenBook, default_tokens_path
from slotline.server.options import ServerOptions

# Connections a bound port holds before the server accepts them: a run started before the
# server is up waits in this queue instead of being refused.
BACKLOG = 2048


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, tokens: TokenBook, open_mode: bool = False) -> None:
    """Refuse to listen beyond this machine while anyone could use the API unauthenticated.

    Raises:
        InvalidInput: `host` is not a loopback address and no token exists, or open mode
            (`auth: none`) was asked for.
    """
    if is_loopback(host):
        return
    if open_mode:
        raise InvalidInput(
            f"refusing to listen on {host} in open mode (auth: none / --no-auth): anyone "
            "who can reach it could run commands. Listen on 127.0.0.1, or drop open mode "
            "and create a token with `slotline token create --role admin --name NAME`"
        )
    if tokens.has_tokens():
        return
    raise InvalidInput(
        f"refusing to listen on {host}: no API tokens exist, so anyone who can reach it "
        "could run commands. Create one first with `slotline token create --role admin "
        f"--name NAME` (stored hashed in {tokens.path}), or listen on 127.0.0.1"
    )


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and
    # without it every small answer waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock  # not inheritable (Python's default): no agent may hold the node's port


def open_listener(host: str, port: int, options: ServerOptions | None = None) -> socket.socket:
    """Bind the API's socket: `slotline serve` does this before its node registers or
    touches any run, so that a port in use stops it with nothing changed.

    Raises:
        InvalidInput: the bind is refused (no tokens beyond loopback) or the address is
            unusable (e.g. already in use).
    """
    options = options or ServerOptions()
    check_bind(host, TokenBook(options.tokens_path or default_tokens_path()), options.open_mode)
    return _listen(host, port)
