"""`slotline bulk`: one verb on many tasks (by ids or by filter), and `slotline stop`, the
emergency stop."""

from __future__ import annotations

import json

import click

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.filters import filter_options, task_filter
from slotline.cli.plain import print_json, short_id
from slotline.cli.submit import parse_priority
from slotline.errors import InvalidInput
from slotline.models import Priority
from slotline.store import BULK_CHUNK, BULK_VERBS, MAX_BULK
from slotline.store.bulk import Progress
from slotline.taskfilter import ListQuery


@click.command()
@click.argument("verb", type=click.Choice(BULK_VERBS))
@click.argument("task_ids", metavar="[ID]...", nargs=-1)
@filter_options
@click.option(
    "--priority",
    "-p",
    "level",
    metavar="LEVEL",
    callback=parse_priority,
    help="The new priority (verb priority).",
)
@click.option("--reason", "-r", metavar="R", help="Why (terminate, priority; kept in events).")
@click.option("--force", is_flag=True, help="restart: stop running tasks first.")
@click.option("--dry-run", "-n", is_flag=True, help="List the tasks; change nothing.")
@json_option
@pass_state
def bulk(
    state: CliState,
    verb: str,
    task_ids: tuple[str, ...],
    level: Priority | None,
    reason: str | None,
    force: bool,
    dry_run: bool,
) -> None:
    """Apply VERB (cancel, terminate, priority, hold, release, restart) to the tasks
    given by id, or to every task matching the filter options, with one event per
    task. Tasks the verb does not apply to are skipped, with why. The tasks change a
    chunk of 500 at a time, each chunk committed on its own (progress on stderr).

    \b
    slotline bulk cancel --status queued --agent claude
    slotline bulk priority -p urgent 3f2a 9c1d --reason "release day"
    """
    wanted = task_filter()
    if bool(task_ids) == (not wanted.empty):
        raise InvalidInput("give task ids, or filter options (--status, --agent…), not both")
    store = state.store
    if task_ids:
        refs = list(task_ids)
    else:
        # One more than a bulk verb takes: enough to refuse a filter that matches too many.
        refs = [t.id for t in store.list_page(ListQuery(wanted, limit=MAX_BULK + 1)).tasks]
        if len(refs) > MAX_BULK:
            raise InvalidInput(f"the filter matches more than {MAX_BULK} tasks; narrow it")
    if dry_run:
        if state.json:
            print_json({"verb": verb, "dry_run": True, "matched": refs})
        else:
            click.echo(f"would {verb} {len(refs)} task(s): {' '.join(map(short_id, refs))}")
        return
    result = store.bulk(
        verb, refs, priority=level, reason=reason, force=force, progress=_progress(state, verb)
    )
    if state.json:
        print_json(result.to_dict())
        return
    click.echo(f"{verb}: {len(result.done)} task(s) changed, {len(result.skipped)} skipped")
    for skipped in result.skipped:
        click.echo(f"skipped {short_id(skipped['id'])}: {skipped['error']}", err=True)


def _progress(state: CliState, verb: str) -> Progress:
    """Report each committed chunk of a bulk verb longer than one, on stderr (a JSON
    line with --json), so that a long call shows it is moving."""

    def report(done: int, total: int) -> None:
        if total <= BULK_CHUNK:
            return
        if state.json:
            click.echo(
                json.dumps({"progress": {"verb": verb, "done": done, "total": total}}), err=True
            )
        else:
            click.echo(f"{verb}: {done}/{total} task(s)", err=True)

    return report


@click.command()
@click.option("--reason", "-r", metavar="R", default="emergency stop", show_default=True)
@click.option("--yes", is_flag=True, help="Required: really stop every run.")
@json_option
@pass_state
def stop(state: CliState, reason: str, yes: bool) -> None:
    """Emergency stop: pause, and terminate every running task (needs --yes).

    `slotline resume` starts tasks again; the terminated ones can be restarted.
    """
    if not yes:
        raise InvalidInput("stop terminates every running task; run `slotline stop --yes`")
    stopped = state.store.emergency_stop(reason)
    if state.json:
        print_json({"paused": True, "stopped": stopped})
    else:
        click.echo(f"paused, and asked {len(stopped)} running task(s) to stop ({reason})")
