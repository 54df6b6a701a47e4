"""The HTTP client of a remote node and the `Backend` the CLI speaks through (local or remote).

`from slotline.client import SlotlineClient` (the path docs/http.md gives) imports the
client on first use, so the modules beside it (the wire format, the protocol) stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from slotline.client.http import SlotlineClient

__all__ = ["SlotlineClient"]


def __getattr__(name: str) -> Any:
    if name == "SlotlineClient":
        from slotline.client.http import SlotlineClient

        return SlotlineClient
    raise AttributeError(f"module 'slotline.client' has no attribute {name!r}")
