"""The knobs of the HTTP server (`ServerOptions`): a module of its own, without FastAPI, so
that `slotline serve` can read them and bind its port before it imports the server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServerOptions:
    """Knobs of the HTTP server (slotline.yaml's `raw_commands` aside, not in the file)."""

    tokens_path: Path | None = None
    # Set when listening beyond loopback: with every token revoked, refuse all callers
    # instead of falling back to open mode.
    require_tokens: bool = False
    # Open mode asked for explicitly (`auth: none`, `serve --no-auth`): every caller is
    # the local admin, tokens or not (a task token keeps its task's scope).
    open_mode: bool = False
    # Seconds between re-checks of the token an open stream (WebSocket, SSE, log follow)
    # was opened with: a revoked token, or an attempt that ended, ends the stream.
    auth_recheck: float = 1.0
    # uvicorn's access log (one line per request, at info); `token=` values are redacted.
    access_log: bool = False
    # Bodies larger than this are refused with 413 before they are read in full.
    max_body_bytes: int = 2 * 1024 * 1024
    # Raw commands (argv lists, env) from admins only; agent types and callables stay
    # open. None: as slotline.yaml's `raw_commands` says (admins, by default).
    raw_commands_admin_only: bool | None = None
    # Host names (`name` for any port, `name:port`, `*.domain`, `*`) the server answers
    # to besides loopback names and the address a connection arrived on, with its port;
    # `serve_http` adds the host it binds. Other Hosts are refused (DNS rebinding).
    allowed_hosts: tuple[str, ...] = ()
    # Browser origins (`https://dash.example:8443`; `*` for any) allowed to change things
    # (POST…) and open the WebSocket, besides the server's own.
    allowed_origins: tuple[str, ...] = ()
    # Seconds of silence after which an event stream sends a heartbeat.
    heartbeat: float = 15.0
    # Events one stream client may fall behind by before it is dropped.
    client_queue: int = 1000
    # How long the Hephaestus routes wait for a bumped/restarted task to start.
    compat_start_wait: float = 5.0
    # How often a followed log file is checked for growth.
    log_poll: float = 0.25
    # Directories `/readyz` checks can be written (a node's logs, a SQLite store's):
    # a full disk there makes it 503 while it lasts.
    space_dirs: tuple[Path, ...] = ()
