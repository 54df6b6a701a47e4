"""The dashboard's static files, served at `/` from the package with a strict
Content-Security-Policy: scripts, styles and connections from this origin only, no inline
script, no framing."""

from __future__ import annotations

from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable

from fastapi import APIRouter, HTTPException
from starlette.responses import Response

CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
}

router = APIRouter(include_in_schema=False)


@cache
def _files() -> dict[str, bytes]:
    """Every servable file of the package's `dashboard` folder, by its path under it."""
    found: dict[str, bytes] = {}
    root = resources.files("slotline.dashboard")

    def walk(folder: Traversable, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif any(entry.name.endswith(ext) for ext in TYPES):
                found[prefix + entry.name] = entry.read_bytes()

    walk(root, "")
    return found


def _file(name: str) -> Response:
    body = _files().get(name)
    if body is None:
        raise HTTPException(404, f"no dashboard file {name!r}")
    media = TYPES["." + name.rsplit(".", 1)[-1]]
    return Response(body, media_type=media, headers=HEADERS)


@router.get("/")
async def index() -> Response:
    """The dashboard page (its data comes from /api with the caller's token)."""
    return _file("index.html")


@router.get("/ui/{name:path}")
async def static(name: str) -> Response:
    """The dashboard's scripts, styles and vendored libraries."""
    return _file(name)
