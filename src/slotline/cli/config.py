"""`slotline config`: print the effective configuration (file, then SLOTLINE_* variables),
and what the running nodes of the store read and where it differs from theirs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.plain import print_json, printable, timestamp
from slotline.clock import utcnow
from slotline.config.file import load_config, lookup_places, redacted, shown_store
from slotline.errors import SlotlineError

if TYPE_CHECKING:
    from slotline.config.file import Config
    from slotline.store import PublishedConfig


@click.command("config")
@click.option(
    "--config",
    "path",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The configuration file (default: $SLOTLINE_CONFIG, else slotline.yaml here or in "
    "the nearest folder above, else $XDG_CONFIG_HOME/slotline/slotline.yaml).",
)
@json_option
@pass_state
def show_config(state: CliState, path: Path | None) -> None:
    """Print the effective configuration.

    The file's settings, overridden by SLOTLINE_* environment variables, with every
    default filled in and any password in the store URL hidden. An invalid file is
    refused with the key and line at fault. With --url (and no --config): the server's.
    On a store, then, the file each running node read, and the keys where this
    configuration differs from what that node published.
    """
    path = path or state.config_path
    remote = state.remote if path is None else None
    if remote is not None:
        effective, origin = remote.config(), f"the configuration of the server at {remote.url}"
        nodes = None
    else:
        from slotline.store.sqlite import default_path

        loaded = load_config(path)
        effective = redacted(loaded)
        # The store a node started here serves: --store, $SLOTLINE_STORE, the file's, the default.
        effective["store"] = shown_store(state.store_url or loaded.store or str(default_path()))
        origin = (
            f"read from {loaded.source}"
            if loaded.source is not None
            else f"no slotline.yaml found (looked in {lookup_places()}): defaults"
        )
        origin += ", with SLOTLINE_* variables applied"
        if state.store_url is None and loaded.store:
            state.store_url = loaded.store  # the nodes listed are those of the store shown
        nodes = running_nodes(state, loaded) if state.url is None else None
    if state.json:
        if nodes is not None:
            effective = {**effective, "nodes": nodes.to_json()}
        print_json(effective)
        return
    click.echo(f"# {origin}")
    click.echo(yaml.safe_dump(effective, sort_keys=False, allow_unicode=True), nl=False)
    for line in [] if nodes is None else nodes.lines(utcnow()):
        click.echo(f"# {line}")


@dataclass(frozen=True)
class RunningNodes:
    """What the running nodes of the store published, each with where the local
    configuration differs from it; or why the store could not be read."""

    published: list[tuple[PublishedConfig, list[str]]]
    unread: str | None = None

    def to_json(self) -> list[dict[str, Any]] | None:
        """Each node's `node`, `source` (the file it read), `published_at` and `differs`
        (null when the store could not be read)."""
        if self.unread is not None:
            return None
        return [{**p.to_dict(), "differs": differs} for p, differs in self.published]

    def lines(self, now: float) -> list[str]:
        """For people, as YAML comments (the output stays YAML)."""
        if self.unread is not None:
            return [f"running nodes: unknown (the store could not be read: {self.unread})"]
        if not self.published:
            return ["running nodes: none has published its configuration to this store"]
        lines = ["running nodes:"]
        for node, differs in self.published:
            read = printable(node.source or "no file (defaults)")
            when = timestamp(node.published_at, now)
            where = f"differs here in {', '.join(differs)}" if differs else "same as here"
            lines.append(f"  {printable(node.node_id)}: read {read}, published {when}; {where}")
        return lines


def running_nodes(state: CliState, local: Config) -> RunningNodes:
    """What the running nodes of the store published, compared with `local`."""
    from slotline.config.published import differences

    try:
        published = state.local_store.published_configs()
    except SlotlineError as exc:
        return RunningNodes([], str(exc))
    return RunningNodes([(p, differences(local, p)) for p in published])
