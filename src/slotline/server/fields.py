"""The types of the values the HTTP API takes (a task id, a priority, a whole number),
each stated once: pydantic validates a request with it and the OpenAPI document shows
it, so that what the schema allows is what the server accepts."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import BeforeValidator, Field

from slotline.bounds import ID_PATTERN, Range, Spelled, parse_id
from slotline.models import PRIORITY_WORDS


def whole_float(value: object) -> object:
    """`3.0` as 3: JSON Schema's integers include it, and a strict int field refuses it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in word)


# A whole number: `3` or `3.0` (JSON Schema's integers), not `true` nor `"3"`.
StrictWhole = Annotated[int, Field(strict=True), BeforeValidator(whole_float)]
# A priority as `Priority.parse` takes it: a name in any case, or a number 0..3.
PriorityIn = (
    Annotated[str, Field(pattern=f"^({'|'.join(map(_any_case, PRIORITY_WORDS))})$")]
    | Annotated[StrictWhole, Range(0, 3, whole=True)]
)
# A task named in a body or a query: its id, a unique prefix, or a dashed UUID.
TASK_ID = Spelled(ID_PATTERN, parse_id)
TaskId = Annotated[str, TASK_ID, Field(description="A task id or unique prefix")]
# The same in a route's path (`/api/tasks/{ref}`).
TaskRef = Annotated[str, TASK_ID, Path(description="A task id, a unique prefix or a dashed UUID")]
