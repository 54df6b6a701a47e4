"""`slotline schedule`: recurring tasks, submitted at each tick of a cron expression."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import click

from slotline.bounds import ATTEMPTS
from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.numbers import Number
from slotline.cli.plain import ago, print_json, printable, short_id, strict_json
from slotline.cli.submit import parse_duration, parse_pairs, parse_priority
from slotline.clock import iso, utcnow
from slotline.models import Priority

if TYPE_CHECKING:
    from slotline.scheduler.cron import Schedule


class ScheduleBackend(Protocol):
    """The schedule verbs, the same on a store (`--store`) and a server (`--url`)."""

    def schedules(self) -> list[Schedule]: ...

    def schedule(self, name: str) -> Schedule: ...

    def add_schedule(
        self,
        name: str,
        cron_expr: str,
        spec: dict[str, Any],
        *,
        tz: str = "UTC",
        overlap: str = "skip",
        paused: bool = False,
        replace_existing: bool = False,
    ) -> Schedule: ...

    def pause_schedule(self, name: str) -> Schedule: ...

    def resume_schedule(self, name: str) -> Schedule: ...

    def remove_schedule(self, name: str) -> Schedule: ...


def _backend(state: CliState) -> ScheduleBackend:
    return cast(ScheduleBackend, state.store)


@click.group("schedule")
def schedule() -> None:
    """Recurring tasks: a command (or agent prompt) submitted at each tick of a cron
    expression, exactly once however many nodes serve the store.

    A node submits the task when the tick comes; with none running, missed ticks fire
    once when one starts. Times are UTC unless --tz names a zone.
    """


@schedule.command("add")
@click.argument("name")
@click.option(
    "--cron",
    "cron_expr",
    required=True,
    metavar="EXPR",
    help='Minute hour day month weekday, e.g. "0 3 * * *" (03:00 daily); a sixth field '
    "first gives seconds.",
)
@click.option("--tz", default="UTC", show_default=True, help="Time zone of the ticks.")
@click.option(
    "--overlap",
    type=click.Choice(["skip", "queue", "replace"]),
    default="skip",
    show_default=True,
    help="While the previous run has not ended: skip the tick, queue another run, or "
    "cancel it and submit anew.",
)
@click.option("--paused", is_flag=True, help="Add it paused (resume it later).")
@click.option("--replace", is_flag=True, help="Change the schedule of that name if it exists.")
@click.option("--priority", "-p", metavar="P", callback=parse_priority, help="Task priority.")
@click.option("--title", "-t", metavar="T", help="Task title (default: the command line).")
@click.option("--agent", "-a", metavar="A", help="Agent type (with --prompt: of slotline.yaml).")
@click.option(
    "--workspace",
    "-w",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Working directory of the runs (default: the current directory).",
)
@click.option("--user", "-u", metavar="U", help="Who the tasks are for.")
@click.option(
    "--label", "-l", "labels", metavar="K=V", callback=parse_pairs, multiple=True, help="A label."
)
@click.option(
    "--env", "-e", "env", metavar="K=V", callback=parse_pairs, multiple=True, help="Env variable."
)
@click.option("--timeout", metavar="S", callback=parse_duration, help="Run time limit.")
@click.option("--ttl", metavar="S", callback=parse_duration, help="Expire if not started in time.")
@click.option("--max-attempts", metavar="N", type=Number(ATTEMPTS), help="Runs allowed.")
@click.option("--prompt", metavar="TEXT", help="With --agent NAME: the agent type's prompt.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@json_option
@pass_state
def add(
    state: CliState,
    name: str,
    cron_expr: str,
    tz: str,
    overlap: str,
    paused: bool,
    replace: bool,
    priority: Priority | None,
    title: str | None,
    agent: str | None,
    workspace: Path | None,
    user: str | None,
    labels: dict[str, str],
    env: dict[str, str],
    timeout: float | None,
    ttl: float | None,
    max_attempts: int | None,
    prompt: str | None,
    command: tuple[str, ...],
) -> None:
    """Add a schedule: schedule add NAME --cron EXPR [OPTIONS] -- CMD ARGS…"""
    from slotline.client.backend import agent_type_fields

    if not command and prompt is None:
        raise click.UsageError("give the command after --, or --agent NAME --prompt TEXT")
    spec: dict[str, Any] = {
        "command": list(command),
        "title": title,
        "agent": agent,
        "workspace": str((workspace or Path.cwd()).expanduser().resolve()),
        "user": user,
        "labels": labels,
        "env": env,
        "priority": None if priority is None else priority.label,
        "timeout": timeout,
        "queue_ttl": ttl,
        "max_attempts": max_attempts,
    }
    if prompt is not None:
        spec = agent_type_fields(state.store, state.config, spec, prompt)
    spec = {key: value for key, value in spec.items() if value not in (None, {}, [])}
    added = _backend(state).add_schedule(
        name, cron_expr, spec, tz=tz, overlap=overlap, paused=paused, replace_existing=replace
    )
    if state.json:
        print_json(added.to_dict())
        return
    from slotline.scheduler.cron import describe

    when = "paused" if added.paused else f"next at {iso(added.next_at)}"
    click.echo(f"schedule {added.name}: {describe(added.cron)} ({added.tz}), {when}")


@schedule.command("ls")
@json_option
@pass_state
def list_schedules(state: CliState) -> None:
    """The schedules, with their next tick, last run and runs not yet ended."""
    found = _backend(state).schedules()
    if state.json:
        print_json([s.to_dict() for s in found])
        return
    if not found:
        click.echo("no schedules (add one with `slotline schedule add NAME --cron …`)")
        return
    now = utcnow()
    rows = [("NAME", "CRON", "TZ", "OVERLAP", "NEXT", "LAST TASK", "LIVE", "TASK")]
    for item in found:
        task = item.spec.get("title") or " ".join(item.spec.get("command", []))
        rows.append(
            (
                item.name,
                item.cron,
                item.tz,
                item.overlap,
                "paused" if item.paused else f"{iso(item.next_at)} ({ago(item.next_at, now)})",
                short_id(item.last_task_id),
                str(len(item.live)),
                printable(str(task))[:60],
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[-1]]).rstrip())


@schedule.command("show")
@click.argument("name")
@json_option
@pass_state
def show(state: CliState, name: str) -> None:
    """One schedule in full."""
    found = _backend(state).schedule(name)
    _print(state, found, "")


def _print(state: CliState, item: Schedule, verb: str) -> None:
    if state.json:
        print_json(item.to_dict())
        return
    if verb:
        click.echo(f"schedule {item.name} {verb}")
        return
    data = item.to_dict()
    for key in ("name", "cron", "tz", "overlap", "paused", "origin", "next_at", "last_at"):
        click.echo(f"{key:<13} {data[key]}")
    click.echo(f"{'last task':<13} {item.last_task_id or '-'}")
    click.echo(f"{'live tasks':<13} {', '.join(short_id(i) for i in item.live) or '-'}")
    click.echo(f"{'task':<13} {printable(strict_json(item.spec))}")


@schedule.command("pause")
@click.argument("name")
@json_option
@pass_state
def pause(state: CliState, name: str) -> None:
    """Stop submitting at its ticks (a run already going goes on)."""
    _print(state, _backend(state).pause_schedule(name), "paused")


@schedule.command("resume")
@click.argument("name")
@json_option
@pass_state
def resume(state: CliState, name: str) -> None:
    """Submit again, from the next tick after now."""
    item = _backend(state).resume_schedule(name)
    _print(state, item, f"resumed: next at {iso(item.next_at)}")


@schedule.command("rm")
@click.argument("name")
@json_option
@pass_state
def remove(state: CliState, name: str) -> None:
    """Remove a schedule; the tasks it submitted stay."""
    _print(state, _backend(state).remove_schedule(name), "removed")
