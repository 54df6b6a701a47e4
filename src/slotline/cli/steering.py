"""The steering commands: cancel, terminate, boost, bump, move, priority, restart, hold,
release, pause, resume and clear."""

from __future__ import annotations

from collections.abc import Callable

import click

from slotline.bounds import ORDINAL
from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.numbers import Number
from slotline.cli.plain import describe_place, print_json, short_id
from slotline.cli.submit import parse_priority
from slotline.errors import InvalidInput
from slotline.models import PENDING, Priority, Status, Task
from slotline.store.readback import read_back

task_argument = click.argument("task_id", metavar="ID")


def _report(state: CliState, changed: Task, describe: Callable[[Task], str]) -> None:
    """Print the task as it is now (JSON), or one line saying what happened."""
    task = read_back(state.store.get, changed)
    if state.json:
        print_json(task.to_dict())
    else:
        click.echo(describe(task))


@click.command()
@task_argument
@click.option("--cascade", is_flag=True, help="Also cancel its subtasks, and theirs.")
@json_option
@pass_state
def cancel(state: CliState, task_id: str, cascade: bool) -> None:
    """Cancel a task.

    A task not started ends at once; a running one is stopped (TERM, then KILL) and
    its slot frees when its process has exited.
    """
    task = state.store.cancel(task_id, cascade=cascade)

    def describe(task: Task) -> str:
        subtasks = " and its subtasks" if cascade else ""
        if task.status is Status.RUNNING:
            return (
                f"cancelling {short_id(task.id)}{subtasks}: its process is being stopped; "
                "the slot frees when it exits"
            )
        return f"cancelled {short_id(task.id)}{subtasks}"

    _report(state, task, describe)


@click.command()
@task_argument
@click.option(
    "--reason",
    "-r",
    metavar="R",
    default="by request",
    show_default=True,
    help="Why; the task fails with `terminated: R`.",
)
@click.option(
    "--resumable",
    is_flag=True,
    help="Its next attempt (`restart`) continues the agent's session (`resume`).",
)
@json_option
@pass_state
def terminate(state: CliState, task_id: str, reason: str, resumable: bool) -> None:
    """Stop a running task; it fails.

    It ends as failed with `terminated: REASON` and the next task starts. With
    --resumable, restarting it later resumes the agent's session instead of starting
    over (its agent type needs a `resume` template).
    """
    task = state.store.terminate(task_id, reason, resumable)
    _report(
        state,
        task,
        lambda t: (
            f"terminating {short_id(t.id)}: it fails as 'terminated: {reason}' "
            "once its process exits"
        ),
    )


@click.command()
@task_argument
@json_option
@pass_state
def boost(state: CliState, task_id: str) -> None:
    """Start next: put a task at position 1.

    Limits still apply; use bump to start it now whatever the limits say.
    """
    task = state.store.boost(task_id)
    _report(state, task, lambda t: f"boosted {short_id(t.id)}: {describe_place(t)}")


@click.command()
@task_argument
@json_option
@pass_state
def bump(state: CliState, task_id: str) -> None:
    """Start now, even over the limits.

    The next dispatch starts the task; its attempt is marked over-limit and nothing
    else starts until the count is back under the limit.
    """
    task = state.store.bump(task_id)
    _report(
        state,
        task,
        lambda t: (
            f"bumped {short_id(t.id)}: it starts at the next dispatch, over the limit if need be"
        ),
    )


@click.command()
@task_argument
@click.option("--to", "to", metavar="N", type=Number(ORDINAL), help="To position N.")
@click.option("--before", metavar="ID", help="Just before this queued task.")
@click.option("--after", metavar="ID", help="Just after this queued task.")
@json_option
@pass_state
def move(
    state: CliState, task_id: str, to: int | None, before: str | None, after: str | None
) -> None:
    """Move a queued task in line.

    Give exactly one of --to N, --before ID or --after ID.
    """
    if sum(x is not None for x in (to, before, after)) != 1:
        raise click.UsageError("give exactly one of --to N, --before ID, --after ID")
    task = state.store.move(task_id, to=to, before=before, after=after)
    _report(state, task, lambda t: f"moved {short_id(t.id)}: {describe_place(t)}")


@click.command()
@task_argument
@click.argument("level", metavar="LEVEL", callback=parse_priority)
@click.option("--reason", "-r", metavar="R", help="Why (kept in the event).")
@json_option
@pass_state
def priority(state: CliState, task_id: str, level: Priority, reason: str | None) -> None:
    """Set the priority of a task not yet started.

    LEVEL is urgent, high, normal or low (P0..P3; medium means normal).
    """
    task = state.store.set_priority(task_id, level, reason)
    _report(
        state,
        task,
        lambda t: f"priority of {short_id(t.id)} is now {t.priority.label}: {describe_place(t)}",
    )


@click.command()
@task_argument
@click.option("--force", is_flag=True, help="Restart a running task: stop it, then queue it.")
@json_option
@pass_state
def restart(state: CliState, task_id: str, force: bool) -> None:
    """Run an ended or blocked task again.

    It gets a new attempt at the tail of its priority band; its history is kept.
    """
    task = state.store.restart(task_id, force=force)

    def describe(task: Task) -> str:
        if task.status is Status.RUNNING:
            return (
                f"restarting {short_id(task.id)}: its process is being stopped; it is queued "
                "again once it exits"
            )
        return f"restarted {short_id(task.id)}: {describe_place(task)}"

    _report(state, task, describe)


@click.command()
@task_argument
@json_option
@pass_state
def hold(state: CliState, task_id: str) -> None:
    """Keep a queued task from starting until released."""
    task = state.store.hold(task_id)
    _report(state, task, lambda t: f"held {short_id(t.id)}: it starts only after release")


@click.command()
@task_argument
@json_option
@pass_state
def release(state: CliState, task_id: str) -> None:
    """Put a held task back in line, at its old place."""
    task = state.store.release(task_id)
    _report(state, task, lambda t: f"released {short_id(t.id)}: {describe_place(t)}")


@click.command()
@json_option
@pass_state
def pause(state: CliState) -> None:
    """Stop starting tasks; running ones go on."""
    state.store.pause()
    if state.json:
        print_json({"paused": True})
    else:
        click.echo("paused: running tasks go on, nothing new starts (slotline resume)")


@click.command()
@json_option
@pass_state
def resume(state: CliState) -> None:
    """Start tasks again after a pause."""
    state.store.resume()
    if state.json:
        print_json({"paused": False})
    else:
        click.echo("resumed: free slots are filled from the line")


@click.command()
@click.option("--force", is_flag=True, help="Required: really cancel them.")
@json_option
@pass_state
def clear(state: CliState, force: bool) -> None:
    """Cancel every task not yet started (needs --force).

    Queued, waiting and held tasks are cancelled; running ones go on.
    """
    if not force:
        counts = state.store.counts()
        pending = sum(counts.get(s.value, 0) for s in PENDING)
        tasks = "1 task that has" if pending == 1 else f"{pending} tasks that have"
        raise InvalidInput(
            f"clear would cancel {tasks} not started; run `slotline clear --force` to do it",
            would_cancel=pending,
        )
    cancelled = state.store.clear()
    if state.json:
        print_json({"cancelled": cancelled})
    else:
        click.echo(f"cancelled {cancelled} task{'' if cancelled == 1 else 's'}")
