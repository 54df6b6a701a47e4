"""The filter options of the commands that pick tasks by filter (`ls`, `bulk`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from slotline.models import Status

if TYPE_CHECKING:  # pydantic, imported only by the commands that filter
    from slotline.taskfilter import TaskFilter

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = [
    click.option(
        "--status",
        "-s",
        "statuses",
        multiple=True,
        type=click.Choice([s.value for s in Status]),
        help="Only tasks in this status (repeatable).",
    ),
    click.option("--agent", "-a", metavar="A", help="Only tasks of agent type A."),
    click.option("--workspace", "-w", metavar="DIR", help="Only tasks of this workspace."),
    click.option("--user", "-u", metavar="U", help="Only tasks of this user."),
    click.option("--label", "-l", "labels", multiple=True, metavar="K[=V]", help="Repeatable."),
    click.option("--search", "-q", metavar="TEXT", help="Only tasks whose title or id has TEXT."),
]


def filter_options(command: F) -> F:
    """Add --status, --agent, --workspace, --user, --label and --search; the command
    gets them as `statuses`, `agent`, `workspace`, `user`, `labels` and `search`."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def task_filter(
    statuses: tuple[str, ...],
    agent: str | None,
    workspace: str | None,
    user: str | None,
    labels: tuple[str, ...],
    search: str | None,
) -> TaskFilter:
    """The TaskFilter of the options.

    Raises:
        click.BadParameter: a value is out of bounds (too long, too many labels).
    """
    from pydantic import ValidationError

    from slotline.taskfilter import TaskFilter

    try:
        return TaskFilter(
            status=[Status(s) for s in dict.fromkeys(statuses)],
            agent=agent,
            workspace=workspace,
            user=user,
            label=list(labels),
            q=search,
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise click.BadParameter(f"{where}: {error['msg']}") from None
