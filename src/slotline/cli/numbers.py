"""Numbers an option takes, checked against their `Range` and refused in its words."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from slotline.bounds import Range
from slotline.errors import InvalidInput

if TYPE_CHECKING:
    _NumberType = click.ParamType[int | float, object]
else:  # generic only in click >= 8.2
    _NumberType = click.ParamType


class Number(_NumberType):
    """An int (the range is `whole`) or a float within `bounds`: `--max-attempts 1000` is
    refused with "must be between 1 and 100, got 1000"."""

    def __init__(self, bounds: Range) -> None:
        self.bounds = bounds
        self.name = "integer" if bounds.whole else "number"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int | float:
        try:
            return self.bounds.parse(value)
        except InvalidInput as exc:
            self.fail(str(exc), param, ctx)


def whole(minimum: int, maximum: int) -> Number:
    """A whole number from `minimum` to `maximum`, both allowed."""
    return Number(Range(minimum, maximum, whole=True))


def seconds(minimum: float, maximum: float) -> Number:
    """A number of seconds from `minimum` to `maximum`, both allowed."""
    return Number(Range(minimum, maximum, unit="seconds"))
