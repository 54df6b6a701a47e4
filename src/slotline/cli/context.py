"""What one CLI invocation shares between the group and its command: queue and output mode."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # imported when first used: not every command needs them
    from slotline.client.backend import Backend
    from slotline.client.http import SlotlineClient
    from slotline.config.file import Config
    from slotline.store import Store

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliState:
    """Options of the `slotline` group; the store (or the connection to the server at
    `url`) is opened on first use and closed at exit."""

    store_url: str | None = None
    url: str | None = None
    token: str | None = field(default=None, repr=False)
    json: bool = False
    config_path: Path | None = None
    _store: Store | None = field(default=None, repr=False)
    _client: SlotlineClient | None = field(default=None, repr=False)
    _config: Config | None = field(default=None, repr=False)

    @property
    def config(self) -> Config:
        """slotline.yaml (as `config.find_config_file` finds it), loaded once."""
        if self._config is None:
            from slotline.config.file import load_config

            self._config = load_config(self.config_path)
        return self._config

    @property
    def store(self) -> Backend:
        """The queue the command acts on: the server at `url` if given, else the store."""
        remote = self.remote
        return remote if remote is not None else self.local_store

    @property
    def local_store(self) -> Store:
        """The store itself (from --store, $SLOTLINE_STORE or the default file)."""
        if self._store is None:
            from slotline.store import open_store

            self._store = open_store(self.store_url or None)
        return self._store

    @property
    def remote(self) -> SlotlineClient | None:
        """The client of the server at `url`, or None when working on a store."""
        if self.url is None:
            return None
        if self._client is None:
            from slotline.client.http import SlotlineClient

            self._client = SlotlineClient(self.url, self.token)
        return self._client

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None
        if self._client is not None:
            self._client.close()
            self._client = None


pass_state = click.make_pass_decorator(CliState, ensure=True)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(CliState).json = True


def json_option(function: F) -> F:
    """`--json` after the command name too (`slotline ls --json`), same as `slotline --json ls`."""
    option = click.option(
        "--json",
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=_set_json,
        help="Print JSON (same as `slotline --json COMMAND`).",
    )
    return option(function)


def report_error(message: str, kind: str, as_json: bool) -> None:
    """One line on stderr: `error: …`, or `{"error": …, "type": …}` in JSON mode."""
    text = "; ".join(line.strip() for line in message.splitlines() if line.strip()) or kind
    if as_json:
        click.echo(json.dumps({"error": text, "type": kind}), err=True)
    else:
        click.echo(f"error: {text}", err=True)


def report_warning(message: str, as_json: bool = False) -> None:
    """One line on stderr: `warning: …`, or `{"warning": …}` in JSON mode."""
    text = "; ".join(line.strip() for line in message.splitlines() if line.strip())
    click.echo(json.dumps({"warning": text}) if as_json else f"warning: {text}", err=True)
