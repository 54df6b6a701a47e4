"""The filter options of the commands that pick tasks by filter (`ls`, `bulk`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from slotline.models import Status

if TYPE_CHECKING:  # pydantic, imported only by the commands that filter
    from slotline.taskfilter import TaskFilter

F = TypeVar("F", bound=Callable[..., Any])

_KEY = "slotline.filter"


def _keep(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    ctx.meta.setdefault(_KEY, {})[param.name] = value


# Each option hands its value to `_keep` instead of to the command.
_HIDDEN: dict[str, Any] = {"expose_value": False, "callback": _keep}
_OPTIONS = [
    click.option(
        "--status",
        "-s",
        "status",
        multiple=True,
        type=click.Choice([s.value for s in Status]),
        help="Only tasks in this status (repeatable).",
        **_HIDDEN,
    ),
    click.option("--agent", "-a", metavar="A", help="Only tasks of agent type A.", **_HIDDEN),
    click.option(
        "--workspace", "-w", metavar="DIR", help="Only tasks of this workspace.", **_HIDDEN
    ),
    click.option("--user", "-u", metavar="U", help="Only tasks of this user.", **_HIDDEN),
    click.option(
        "--label", "-l", "label", multiple=True, metavar="K[=V]", help="Repeatable.", **_HIDDEN
    ),
    click.option(
        "--search",
        "-q",
        "q",
        metavar="TEXT",
        help="Only tasks whose title or id has TEXT.",
        **_HIDDEN,
    ),
]


def filter_options(command: F) -> F:
    """Add --status, --agent, --workspace, --user, --label and --search; the command
    reads them with `task_filter()`."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def task_filter() -> TaskFilter:
    """The TaskFilter of the filter options of the running command.

    Raises:
        click.BadParameter: a value is out of bounds (too long, too many labels).
    """
    from pydantic import ValidationError

    from slotline.taskfilter import TaskFilter

    given = click.get_current_context().meta.get(_KEY, {})
    try:
        return TaskFilter(
            status=[Status(s) for s in dict.fromkeys(given.get("status", ()))],
            agent=given.get("agent"),
            workspace=given.get("workspace"),
            user=given.get("user"),
            label=list(given.get("label", ())),
            q=given.get("q"),
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise click.BadParameter(f"{where}: {error['msg']}") from None
