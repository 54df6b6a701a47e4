"""The HTTP server: REST API, live event stream, Hephaestus routes, auth and metrics."""

from __future__ import annotations

from slotline.server.app import create_app
from slotline.server.auth import Principal, create_token, revoke_token, verify_token
from slotline.server.context import ServerOptions
from slotline.server.serve import serve_http

__all__ = [
    "Principal",
    "ServerOptions",
    "create_app",
    "create_token",
    "revoke_token",
    "serve_http",
    "verify_token",
]
