"""Host and Origin checks: what keeps a web page in the user's browser from driving the API.

A page on another site can make the browser send requests to 127.0.0.1, and a DNS
rebinding attack can even make them same-origin for the browser (`attacker.example`
resolving to 127.0.0.1 moments after the page loaded). In open single-user mode there
is no token to stop either. So, before any route runs:

- **Host**: the request must name this server: a loopback name (127.0.0.1, localhost,
  [::1]) or the address the connection arrived on, with the port it arrived on; the
  bind host (`serve_http` adds it); or one of `ServerOptions.allowed_hosts`. A rebound
  name never passes. Refused with 400. `/healthz` and `/readyz` are exempt, for probes.
- **Origin**: on a state-changing request (POST, PUT, PATCH, DELETE) and the WebSocket
  handshake, an `Origin` header, when present, must be the server's own origin (scheme,
  the Host checked above, port) or one of `ServerOptions.allowed_origins`. Refused with
  403. Browsers send Origin on every such request; scripts and CLIs send none and pass.

Reads are not checked for Origin: without CORS headers, a foreign page cannot read the
answers, and the Host check keeps rebound pages out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from slotline.server.errors import error_body

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})  # noqa: S104 - names, not binds
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Probes call these by whatever address reaches the process; they reveal nothing.
UNGUARDED_PATHS = frozenset({"/healthz", "/readyz"})
WS_POLICY = 1008

_HOST = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(?::([0-9]{1,5}))?$")


def split_host(value: str) -> tuple[str, int | None] | None:
    """`name` and `port` of `name[:port]` (an IPv6 name keeps its brackets), lower-cased;
    None when it is not a host at all."""
    match = _HOST.match(value.strip().lower())
    if match is None:
        return None
    return match.group(1), int(match.group(2)) if match.group(2) else None


def host_name(address: str) -> str:
    """An address as a Host header names it: an IPv6 one in brackets."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def _default_port(scheme: str) -> int:
    return 443 if scheme in ("https", "wss") else 80


def _matches(pattern: str, name: str, port: int) -> bool:
    """`*`, `*.example.com`, `name` (any port) or `name:port`."""
    if pattern == "*":
        return True
    if pattern.startswith("*."):
        return name.endswith(pattern[1:].lower())
    parsed = split_host(pattern)
    if parsed is None:
        return False
    return parsed[0] == name and parsed[1] in (None, port)


def expected_hosts(scope: Scope) -> list[str]:
    """The `host:port` names this connection may use besides the allowed ones."""
    server = scope.get("server")
    if not server or server[1] is None:
        return list(LOOPBACK_NAMES)
    names = [*LOOPBACK_NAMES, host_name(str(server[0]))]
    return [f"{name}:{server[1]}" for name in dict.fromkeys(names)]


def host_allowed(host: str, scope: Scope, allowed: Iterable[str]) -> bool:
    """Whether `host` (a Host header) names this server, as the module says."""
    parsed = split_host(host)
    if parsed is None:
        return False
    name, given_port = parsed
    port = given_port if given_port is not None else _default_port(scope.get("scheme", "http"))
    if any(_matches(pattern, name, port) for pattern in allowed):
        return True
    server = scope.get("server")
    if not server or server[1] is None:  # a Unix socket: any port is this server's
        return name in LOOPBACK_NAMES
    return port == server[1] and name in (*LOOPBACK_NAMES, host_name(str(server[0]).lower()))


def _origin_key(origin: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or parts.path not in ("", "/") or parts.query:
        return None
    host = split_host(parts.netloc)
    if host is None:
        return None
    name, port = host
    return scheme, name, port if port is not None else _default_port(scheme)


def origin_allowed(origin: str, scope: Scope, host: str, allowed: Iterable[str]) -> bool:
    """Whether a browser page from `origin` may change things on the server that `host`
    (already checked) names: its own origin, or a listed one (`*` lists all)."""
    key = _origin_key(origin)
    for pattern in allowed:
        if pattern in ("*", origin) or (key is not None and _origin_key(pattern) == key):
            return True
    return key is not None and key == _origin_key(own_origin(scope, host))


def own_origin(scope: Scope, host: str) -> str:
    """The origin of pages this server (named by `host`) serves itself."""
    return f"{'https' if scope.get('scheme') in ('https', 'wss') else 'http'}://{host}"


class RequestGuard:
    """The Host and Origin checks of the module, on every HTTP request and WebSocket."""

    def __init__(
        self, app: ASGIApp, allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]
    ) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind not in ("http", "websocket") or scope["path"] in UNGUARDED_PATHS:
            await self.app(scope, receive, send)
            return
        refusal = self.check(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, error, detail = refusal
        response = JSONResponse(error_body(detail, error), status)
        if kind == "http" or "websocket.http.response" in scope.get("extensions", {}):
            await response(scope, receive, send)
        else:
            await WebSocketClose(WS_POLICY, detail[:120])(scope, receive, send)

    def check(self, scope: Scope) -> tuple[int, str, str] | None:
        """None when the request may go on, else (status, error type, message)."""
        headers = Headers(scope=scope)
        hosts = headers.getlist("host")
        host = hosts[0] if len(hosts) == 1 else ""
        if not host_allowed(host, scope, self.allowed_hosts):
            expected = ", ".join(dict.fromkeys([*expected_hosts(scope), *self.allowed_hosts]))
            shown = "no Host header" if not hosts else f"the Host header {', '.join(hosts)!r}"
            return (
                400,
                "UnknownHost",
                f"{shown} does not name this server (it answers to {expected}); "
                "a request through another name needs that name in the server's "
                "allowed hosts (this guards against DNS rebinding)",
            )
        if scope["type"] == "http" and scope["method"] not in UNSAFE_METHODS:
            return None
        for origin in headers.getlist("origin"):
            if not origin_allowed(origin, scope, host, self.allowed_origins):
                own = own_origin(scope, host)
                return (
                    403,
                    "Forbidden",
                    f"refused a cross-origin request from {origin!r}: only pages from this "
                    f"server's own origin ({own}) or an allowed origin may change things here",
                )
        return None
