"""`slotline notify log`: the recent deliveries and failures of webhooks and command
hooks (admins only through a server, like the hooks themselves)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

import click

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.numbers import whole
from slotline.cli.plain import ago, print_json, printable, short_id
from slotline.clock import utcnow

if TYPE_CHECKING:
    from slotline.store import Delivery


class NotifyBackend(Protocol):
    """The same on a store (`--store`) and a server (`--url`)."""

    def notify_log(self, limit: int = 100) -> list[Delivery]: ...


@click.group("notify")
def notify() -> None:
    """Webhooks (`notify:` in slotline.yaml) and command hooks (`on_event:`)."""


@notify.command("log")
@click.option(
    "--limit", "-n", type=whole(1, 5000), default=50, show_default=True,
    help="How many of the latest deliveries to show.",
)  # fmt: skip
@json_option
@pass_state
def log(state: CliState, limit: int) -> None:
    """Recent deliveries and failures, newest first: when, hook, event and its seq, task,
    node, try, and the HTTP status (or exit code) or why it failed."""
    deliveries = cast(NotifyBackend, state.store).notify_log(limit)
    if state.json:
        print_json([d.to_dict() for d in deliveries])
        return
    if not deliveries:
        click.echo("no deliveries yet")
        return
    now = utcnow()
    click.echo(f"{'WHEN':<9} {'HOOK':<32} {'EVENT':<15} {'SEQ':>6} {'TASK':<8} TRY RESULT")
    for d in deliveries:
        result = f"ok {d.status}" if d.ok else f"FAILED: {d.error or d.status}"
        hook = printable(d.hook)[:32]
        click.echo(
            f"{ago(d.at, now):<9} {hook:<32} {d.event:<15} {d.seq:>6} "
            f"{short_id(d.task_id):<8} {d.attempt:>3} {printable(result)}"
        )
