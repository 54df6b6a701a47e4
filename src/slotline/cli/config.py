"""`slotline config`: print the effective configuration (file, then SLOTLINE_* variables)."""

from __future__ import annotations

from pathlib import Path

import click
import yaml

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.plain import print_json
from slotline.config import load_config, lookup_places, redacted, shown_store
from slotline.store.sqlite import default_path


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
    """
    path = path or state.config_path
    remote = state.remote if path is None else None
    if remote is not None:
        effective, origin = remote.config(), f"the configuration of the server at {remote.url}"
    else:
        config = load_config(path)
        effective = redacted(config)
        # The store a node started here serves: --store, $SLOTLINE_STORE, the file's, the default.
        effective["store"] = shown_store(state.store_url or config.store or str(default_path()))
        origin = (
            f"read from {config.source}"
            if config.source is not None
            else f"no slotline.yaml found (looked in {lookup_places()}): defaults"
        )
        origin += ", with SLOTLINE_* variables applied"
    if state.json:
        print_json(effective)
        return
    click.echo(f"# {origin}")
    click.echo(yaml.safe_dump(effective, sort_keys=False, allow_unicode=True), nl=False)
