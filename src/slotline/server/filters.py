"""The task filter (`slotline.taskfilter`) read from query parameters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from slotline.models import Status
from slotline.taskfilter import MAX_TEXT, TaskFilter

Text = Annotated[str | None, Query(max_length=MAX_TEXT)]


def filter_query(
    status: Annotated[list[Status], Query(description="Repeatable")] = [],  # noqa: B006 - FastAPI copies it
    agent: Text = None,
    workspace: Annotated[str | None, Query(max_length=4096)] = None,
    user: Text = None,
    label: Annotated[
        list[str], Query(max_length=20, description="NAME or NAME=VALUE (repeatable, at most 20)")
    ] = [],  # noqa: B006
    q: Annotated[
        str | None, Query(max_length=MAX_TEXT, description="Part of the title or id")
    ] = None,
) -> TaskFilter:
    """A TaskFilter from query parameters (a status named twice counts once)."""
    try:
        return TaskFilter(
            status=list(dict.fromkeys(status)),
            agent=agent,
            workspace=workspace,
            user=user,
            label=label,
            q=q,
        )
    except ValidationError as exc:  # a bound of the filter itself: the caller's input
        raise RequestValidationError(exc.errors()) from exc
