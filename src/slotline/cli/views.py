"""The read commands: `show`, `ls`, `status` and `events`."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from slotline.bounds import OFFSET, ORDINAL
from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.filters import filter_options, task_filter
from slotline.cli.numbers import Number
from slotline.cli.plain import event_line, print_json, strict_json
from slotline.client.backend import Backend
from slotline.clock import utcnow
from slotline.line import STATUS_HEAD
from slotline.models import Event

if TYPE_CHECKING:
    from slotline.store import QueueStatus

EVENT_PAGE = 1000


@click.command("show")
@click.argument("task_id", metavar="ID")
@json_option
@pass_state
def show_task(state: CliState, task_id: str) -> None:
    """Show one task in full, with its attempts."""
    task = state.store.get(task_id)
    if state.json:
        print_json(task.to_dict())
    else:
        from slotline.cli.detail import task_detail  # rich: for people only
        from slotline.cli.render import show

        show(task_detail(task, utcnow()))


@click.command("ls")
@filter_options
@click.option("--parent", metavar="ID", help="Only the subtasks of this task.")
@click.option("--newest", is_flag=True, help="Newest first (default: oldest first).")
@click.option(
    "--limit",
    "-n",
    metavar="N",
    type=Number(ORDINAL),
    default=100,
    show_default=True,
    help="At most N tasks.",
)
@click.option(
    "--after",
    metavar="ID",
    help="Continue after this task: the last one of the page before.",
)
@json_option
@pass_state
def list_tasks(
    state: CliState,
    parent: str | None,
    newest: bool,
    limit: int,
    after: str | None,
) -> None:
    """List tasks, oldest first, a page of --limit at a time (--after the last one shown
    for the next page).

    Columns: short id, status, priority, position, title, agent, age, ETA (estimated
    start; for a running task, its estimated end).
    """
    from slotline.taskfilter import ListQuery  # `ls` needs pydantic; `status` does not

    wanted = task_filter()
    parent_id = None if parent is None else state.store.get(parent).id
    page = state.store.list_page(
        ListQuery(
            None if wanted.empty else wanted,
            parent_id=parent_id, newest=newest, limit=limit, after=after,
        )
    )  # fmt: skip
    if state.json:
        print_json([t.to_dict() for t in page.tasks])
        return
    if page.tasks:
        from slotline.cli.render import show, task_table  # rich: for people only

        show(task_table(page.tasks, utcnow()))
    else:
        click.echo("no tasks" + (f" {' or '.join(wanted.status)}" if wanted.status else ""))
    if page.next_after is not None:
        click.echo(f"more: slotline ls --after {page.next_after} …", err=True)


@click.command("status")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help=f"List every queued task (default: the first {STATUS_HEAD}).",
)
@click.option(
    "--mine",
    is_flag=True,
    help="Also list your own tasks that have not ended, with positions and ETAs: the "
    "subtree of $SLOTLINE_TASK_ID (inside a run), or a task or user token's tasks.",
)
@json_option
@pass_state
def queue_status_command(state: CliState, show_all: bool, mine: bool) -> None:
    """Show capacity, running tasks and the line.

    Active of max, slots available, at capacity, paused; the running tasks; the
    queued tasks in order with their positions and estimated starts, NEXT UP first.
    """
    # The JSON answer holds the whole line, as it always has.
    current = _status(state, mine, show_all or state.json)
    if state.json:
        print_json(current.to_dict())
        return
    counts = state.store.counts()
    now = utcnow()
    from rich.text import Text  # rich: for people only

    from slotline.cli.render import queue_status, show, task_table

    shown = queue_status(current, counts, now, None if show_all else STATUS_HEAD)
    if current.mine is None:
        show(shown)
    elif current.mine:
        show(
            shown, Text(f"MINE ({len(current.mine)})", style="bold"), task_table(current.mine, now)
        )
    else:
        show(shown, Text("MINE: no live tasks", style="dim"))


def _status(state: CliState, mine: bool, whole: bool) -> QueueStatus:
    root = os.environ.get("SLOTLINE_TASK_ID") or None
    remote = state.remote
    if not mine:
        return state.store.status(all=whole)
    if remote is not None:
        return remote.status(mine=True, root=root, all=whole)
    if root is None:
        raise click.UsageError(
            "--mine needs $SLOTLINE_TASK_ID (set inside a run), or --url with a task or user token"
        )
    store = state.local_store
    return replace(store.status(all=whole), mine=store.mine(root))


@click.command("events")
@click.option(
    "--since",
    metavar="SEQ",
    type=Number(OFFSET),
    help="Events after this sequence number (default: the latest N).",
)
@click.option(
    "--limit",
    "-n",
    metavar="N",
    type=Number(ORDINAL),
    default=100,
    show_default=True,
    help="At most N events.",
)
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    help="Keep printing new events until interrupted (JSON: one object per line).",
)
@json_option
@pass_state
def events(state: CliState, since: int | None, limit: int, follow: bool) -> None:
    """Show the event log.

    Oldest first, one line per event (a JSON list with --json).
    """
    store = state.store
    if since is None:
        since = max(0, store.last_seq() - limit)
    if follow:
        as_json = state.json

        def emit(event: Event) -> None:
            if as_json:
                click.echo(json_line(event))
            else:
                click.echo(event_line(event))

        from slotline.cli.interrupt import run_until_interrupted  # asyncio: only to follow

        start = since
        run_until_interrupted(lambda: _follow(store, start, emit))
        return
    found = store.events(since, limit)
    if state.json:
        print_json([e.to_dict() for e in found])
    else:
        for event in found:
            click.echo(event_line(event))


def json_line(event: Event) -> str:
    return strict_json(event.to_dict())


async def _follow(store: Backend, since: int, emit: Callable[[Event], None]) -> None:
    """Print events as they are committed, by any process, until cancelled."""
    import asyncio

    watcher = store.watcher()
    try:
        while True:
            batch = await asyncio.to_thread(store.events, since, EVENT_PAGE)
            for event in batch:
                emit(event)
                since = event.seq
            if len(batch) < EVENT_PAGE:
                await watcher.wait(2.0)
    finally:
        watcher.close()
