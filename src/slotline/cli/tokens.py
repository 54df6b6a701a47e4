"""`slotline token`: create, list and revoke the API tokens a server accepts."""

from __future__ import annotations

import click
from rich import box
from rich.table import Table
from rich.text import Text

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.plain import ago, print_json
from slotline.cli.render import show
from slotline.clock import iso, utcnow
from slotline.errors import NotFound

# slotline.server.auth.ROLES, spelled out: importing the server package at every CLI start
# would load FastAPI. A test checks that the two agree.
ROLES = ("admin", "user", "viewer")


@click.group("token")
def token() -> None:
    """Create, list and revoke the API tokens of a server.

    Only each token's SHA-256 is kept, in $SLOTLINE_TOKENS, else
    ~/.config/slotline/tokens.json: the file `slotline serve` reads on this machine,
    which takes changes without a restart. These commands act on that file, not
    through --url.
    """


@token.command("create")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    required=True,
    help="admin: everything; user: submit, and read and steer their own tasks; viewer: read only.",
)
@click.option(
    "--name",
    metavar="N",
    required=True,
    help="Who holds it; a user token's tasks carry this name as their user.",
)
@json_option
@pass_state
def create(state: CliState, role: str, name: str) -> None:
    """Create a token and print it; it cannot be shown again.

    Alone on stdout (TOKEN=$(slotline token create …) keeps it); with --json,
    {"name", "role", "token"}.
    """
    from slotline.server.auth import create_token, default_tokens_path

    path = default_tokens_path()
    secret = create_token(name, role, path)
    if state.json:
        print_json({"name": name, "role": role, "token": secret})
        return
    click.echo(secret)
    click.echo(
        f"created token {name!r} ({role}); it is shown only this once "
        f"(its hash is in {path}). Use it with --token or $SLOTLINE_TOKEN.",
        err=True,
    )


@token.command("ls")
@json_option
@pass_state
def list_command(state: CliState) -> None:
    """List the tokens: names, roles and when they were created, never the secrets."""
    from slotline.server.auth import default_tokens_path, list_tokens

    path = default_tokens_path()
    found = list_tokens(path)
    if state.json:
        print_json(
            [{"name": t.name, "role": t.role, "created_at": iso(t.created_at)} for t in found]
        )
        return
    if not found and path.exists():
        click.echo(
            f"no tokens in {path}: as tokens have existed, a server refuses every request "
            "until one is created (or it runs with `auth: none` / `serve --no-auth`)"
        )
        return
    if not found:
        click.echo(f"no tokens in {path}: a server on 127.0.0.1 runs open to local users")
        return
    now = utcnow()
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for column in ("NAME", "ROLE", "CREATED"):
        table.add_column(column, no_wrap=True)
    for item in found:
        table.add_row(Text(item.name), item.role, ago(item.created_at, now))
    show(table)


@token.command("revoke")
@click.argument("name", metavar="NAME")
@json_option
@pass_state
def revoke(state: CliState, name: str) -> None:
    """Remove a token; a running server refuses it from its next request and ends the
    streams opened with it. Revoking the last one does not open the server."""
    from slotline.server.auth import default_tokens_path, revoke_token

    path = default_tokens_path()
    if not revoke_token(name, path):
        raise NotFound(f"no token named {name!r} in {path} (slotline token ls lists them)")
    if state.json:
        print_json({"revoked": name})
    else:
        click.echo(f"revoked token {name!r}")
