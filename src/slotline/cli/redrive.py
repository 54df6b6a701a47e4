"""`slotline redrive`: restart the failed tasks (the dead-letter view) that match a filter."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.plain import print_json, short_id
from slotline.cli.render import show, task_table
from slotline.cli.submit import parse_duration
from slotline.clock import utcnow
from slotline.errors import SlotlineError
from slotline.models import Status, Task

ALL_TASKS = 1_000_000_000
# Below this many tasks a progress bar would only flicker.
PROGRESS_FROM = 20


@dataclass(frozen=True, slots=True)
class Filter:
    """Which failed tasks to restart; every given criterion must match."""

    agent: str | None = None
    since: float | None = None
    reason_contains: str | None = None

    def matches(self, task: Task, now: float) -> bool:
        if task.status is not Status.FAILED:
            return False
        if self.agent is not None and task.agent != self.agent:
            return False
        if self.since is not None and (task.finished_at or 0.0) < now - self.since:
            return False
        needle = (self.reason_contains or "").casefold()
        return needle in (task.failure_reason or "").casefold()


@dataclass
class Outcome:
    matched: list[Task]
    restarted: list[str] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self, dry_run: bool) -> dict[str, Any]:
        return {
            "dry_run": dry_run,
            "matched": [t.id for t in self.matched],
            "restarted": self.restarted,
            "skipped": self.skipped,
        }


@click.command()
@click.option("--agent", "-a", metavar="A", help="Only tasks of agent type A.")
@click.option(
    "--since",
    metavar="S",
    callback=parse_duration,
    help="Only tasks that failed within this time (seconds, or 10m, 2h, 1d…).",
)
@click.option(
    "--reason-contains",
    metavar="TEXT",
    help="Only tasks whose failure reason contains TEXT (any case).",
)
@click.option("--dry-run", "-n", is_flag=True, help="List what would be restarted; change nothing.")
@json_option
@pass_state
def redrive(
    state: CliState,
    agent: str | None,
    since: float | None,
    reason_contains: str | None,
    dry_run: bool,
) -> None:
    """Restart failed tasks that match every given filter.

    Each gets a new attempt at the tail of its priority band, with its history kept;
    tasks blocked on it wait again. `slotline ls --status failed` lists them all.
    """
    store = state.store
    wanted = Filter(agent, since, reason_contains)
    now = utcnow()
    failed = store.list_tasks(Status.FAILED, limit=ALL_TASKS)
    outcome = Outcome([t for t in failed if wanted.matches(t, now)])
    if not dry_run:
        for task in _progress(outcome.matched, quiet=state.json):
            try:
                store.restart(task.id)
            except SlotlineError as exc:  # e.g. restarted by someone else meanwhile
                outcome.skipped.append({"id": task.id, "error": str(exc)})
            else:
                outcome.restarted.append(task.id)
    if state.json:
        print_json(outcome.to_dict(dry_run))
        return
    _report(outcome, dry_run, now)


def _progress(tasks: list[Task], quiet: bool) -> Iterable[Task]:
    """The tasks, with a progress bar on stderr for a long run on a terminal."""
    console = Console(stderr=True)
    if quiet or len(tasks) < PROGRESS_FROM or not console.is_terminal:
        yield from tasks
        return
    columns = (TextColumn("restarting"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        yield from bar.track(tasks)


def _report(outcome: Outcome, dry_run: bool, now: float) -> None:
    count = len(outcome.matched)
    tasks = f"{count} failed task{'' if count == 1 else 's'}"
    if dry_run:
        if outcome.matched:
            show(task_table(outcome.matched, now))
        click.echo(f"would restart {tasks} (run again without --dry-run to do it)")
        return
    if not outcome.matched:
        click.echo("no failed task matches; nothing restarted")
        return
    click.echo(f"restarted {len(outcome.restarted)} of {tasks}")
    for skipped in outcome.skipped:
        click.echo(f"skipped {short_id(skipped['id'])}: {skipped['error']}", err=True)
