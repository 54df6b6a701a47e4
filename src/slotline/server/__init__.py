"""The HTTP server: REST API, live event stream, Hephaestus routes, auth and metrics.

Its exports are imported on first use: `slotline serve` binds its port and starts its node
(`slotline.server.listen`, `slotline.server.options`) before it pays for FastAPI.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from slotline.server.app import create_app
    from slotline.server.auth import Principal, create_token, revoke_token, verify_token
    from slotline.server.options import ServerOptions
    from slotline.server.serve import serve_http

# The exports: name -> module.
_LAZY = {
    "Principal": "slotline.server.auth",
    "ServerOptions": "slotline.server.options",
    "create_app": "slotline.server.app",
    "create_token": "slotline.server.auth",
    "revoke_token": "slotline.server.auth",
    "serve_http": "slotline.server.serve",
    "verify_token": "slotline.server.auth",
}


def __getattr__(name: str) -> typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'slotline.server' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Principal",
    "ServerOptions",
    "create_app",
    "create_token",
    "revoke_token",
    "serve_http",
    "verify_token",
]
