"""The bounds of every number and text slotline accepts, the same on every surface.

The Python API, the CLI (with `--store` or `--url`), the HTTP API and slotline.yaml all
check against these values, so a number that one surface takes another never refuses,
and nothing infinite, NaN or larger than a 64-bit column is ever stored.
"""

from __future__ import annotations

import math
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from slotline.errors import InvalidInput

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
    from pydantic.json_schema import JsonSchemaValue
    from pydantic_core import CoreSchema

# Sequence numbers, offsets and positions: the largest whole number a JSON client holds
# exactly (JavaScript's Number.MAX_SAFE_INTEGER), well inside SQLite's 64 bits. A larger
# bound is a float in the OpenAPI document, which clients read with a different value.
MAX_INT = 2**53 - 1
# Counts: max_concurrent, per-key limits, max_depth, max_children, max_queue_size.
MAX_COUNT = 1_000_000_000
# Durations in seconds (timeout, queue_ttl, expected_duration, aging_interval…): ten years.
_YEAR = 366 * 86400
MAX_SECONDS = 10.0 * _YEAR
_BINARY = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
# Labels: how many a task may carry and how long a value may be.
MAX_LABELS = 64
MAX_LABEL_VALUE = 1024
# A function task's result, as JSON: larger ones fail the attempt, saying so.
MAX_RESULT_BYTES = 1024 * 1024

_HEX = re.compile(r"^[0-9a-f]+$")
# What `parse_id` takes, as a JSON-schema pattern: the HTTP parameters and fields that
# name a task declare it, so the OpenAPI document says what an id is (surrounding
# blanks, which `parse_id` strips, are refused there).
ID_PATTERN = r"^([0-9a-fA-F]{1,32}|[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})$"
_DASHED = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass(frozen=True)
class Range:
    """The bounds of a number, stated once where it is declared, and said in words when a
    value is refused ("must be between 1 and 100", "must be more than 0 seconds and at
    most 10 years"): a bound a person would not name (MAX_INT) is said as "too large".

    In a pydantic model, `Annotated[float, SECONDS]` checks with these words and puts
    the bounds in the JSON schema; the CLI's options check with `refusal`.
    """

    minimum: float
    maximum: float
    whole: bool = False
    unit: Literal["", "seconds", "MiB", "bytes"] = ""
    above: bool = False  # the minimum itself is refused (more than, not at least)

    def words(self) -> str:
        """The range as a person says it: `between 1 and 100`, `at least 1`."""
        low = _say(self.minimum, self.unit)
        if self.maximum >= MAX_INT:
            return f"more than {low}" if self.above else f"at least {low}"
        high = _say(self.maximum, self.unit)
        if self.above:
            return f"more than {low} and at most {high}"
        return f"between {low} and {high}"

    def refusal(self, value: int | float) -> str | None:
        """Why `value` is out of range, to follow its name (None when it is in range)."""
        shown = f"{value:.10g}" if isinstance(value, float) else str(value)
        shown = shown if len(shown) <= 24 else shown[:21] + "..."
        if not math.isfinite(value):
            return f"must be a finite number, got {shown}"
        if value > self.maximum and self.maximum >= MAX_INT:
            return f"is too large, got {shown}"
        low_ok = value > self.minimum if self.above else value >= self.minimum
        if low_ok and value <= self.maximum:
            return None
        return f"must be {self.words()}, got {shown}"

    def parse(self, value: object) -> int | float:
        """`value` as an int (`whole`) or float, finite and in range.

        Raises:
            InvalidInput: not a number, not whole when it must be, infinite, NaN or out of
                range; the message follows the value's name ("must be between 1 and 100").
        """
        number = _number(value, self.whole)
        problem = self.refusal(number)
        if problem is not None:
            raise InvalidInput(problem)
        return number

    def check(self, name: str, value: object) -> int | float:
        """`parse`, with the refusal naming `name` ("max_attempts must be …")."""
        try:
            return self.parse(value)
        except InvalidInput as exc:
            raise InvalidInput(f"{name} {exc}") from None

    # pydantic's hooks: check after the type's own validation, and show the bounds in
    # the JSON schema (OpenAPI, the MCP tools' input schemas).
    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return _checked_after(self._validated, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        shown = handler(schema)
        # A whole number's bounds as integers (`1`, not `1.0`) in pydantic's own schema.
        as_shown = int if self.whole else float
        shown["exclusiveMinimum" if self.above else "minimum"] = as_shown(self.minimum)
        shown["maximum"] = as_shown(self.maximum)
        return shown

    def _validated(self, value: int | float | None) -> int | float | None:
        from pydantic_core import PydanticCustomError

        if value is None:  # `Annotated[int | None, …, ORDINAL]`: None is no number
            return None
        problem = self.refusal(value)
        if problem is not None:
            raise PydanticCustomError("out_of_range", problem.replace("{", "{{"))
        return value


@dataclass(frozen=True)
class Spelled:
    """How a text must be spelled (a task id, a limit key, a schedule name), stated once:
    in a pydantic model, `Annotated[str, Spelled(PATTERN, check)]` refuses a text not
    matching the pattern with the words of the surface's own `check` (which raises
    InvalidInput: "unknown limit key 'x'; use …"), and puts the pattern in the JSON
    schema, so that the OpenAPI document says what the server takes."""

    pattern: str
    check: Callable[[str], object]

    # Range's hook: check after the type's own validation (`self._validated`).
    __get_pydantic_core_schema__ = Range.__get_pydantic_core_schema__

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "pattern": self.pattern}

    def _validated(self, value: str | None) -> str | None:
        from pydantic_core import PydanticCustomError

        if value is None or re.fullmatch(self.pattern, value):
            return value
        try:
            self.check(value)
        except InvalidInput as exc:
            problem = str(exc)
        else:  # blanks around it, which the surface's check strips
            problem = f"{value[:80]!r} has blanks around it"
        raise PydanticCustomError("spelling", problem.replace("{", "{{"))


def _checked_after(validate: Callable[[Any], Any], schema: CoreSchema) -> CoreSchema:
    """`schema`, then `validate` (pydantic's hook of Range and Spelled)."""
    from pydantic_core import core_schema

    return core_schema.no_info_after_validator_function(validate, schema)


# Durations (timeout, queue_ttl, expected_duration, a delay…): more than 0, up to ten years.
SECONDS = Range(0, MAX_SECONDS, unit="seconds", above=True)
# Counts (max_concurrent, per-key limits, max_depth, max_children, max_queue_size).
COUNT = Range(0, MAX_COUNT, whole=True)
# Positions, attempt numbers, page sizes: from 1, with no bound a person would name.
ORDINAL = Range(1, MAX_INT, whole=True)
# Sequence numbers and byte offsets: from 0.
OFFSET = Range(0, MAX_INT, whole=True)
# What a task may ask for: runs (`max_attempts`) and a memory cap in MiB (`memory_mb`).
ATTEMPTS = Range(1, 100, whole=True)
MEMORY_MB = Range(1, 16 * 1024 * 1024, whole=True, unit="MiB")

_UNITS = {
    "seconds": [(_YEAR, "year"), (86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")],
    "bytes": [(1024**p, name) for p, name in reversed(list(enumerate(_BINARY)))],
    "MiB": [(1024 ** (p - 2), name) for p, name in reversed(list(enumerate(_BINARY))) if p >= 2],
}


def _say(amount: float, unit: str) -> str:
    """`amount` of `unit` in the largest unit it fills: 316224000 seconds -> 10 years."""
    if not unit:
        return f"{amount:,.10g}"
    scale, name = next(((s, n) for s, n in _UNITS[unit] if amount >= s), _UNITS[unit][-1])
    count = amount / scale
    text = f"{count:,.3g}" if count < 1000 else f"{count:,.0f}"
    if unit != "seconds" or text == "1":
        return f"{text} {name}"
    return f"{text} {name}s"


def _number(value: object, whole: bool) -> int | float:
    """`value` as an int (`whole`) or a float, refusing what is not a number."""
    what = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"must be {what}, got {value!r}")
    try:
        number: int | float = int(value) if whole and not isinstance(value, float) else float(value)
    except (ValueError, OverflowError):
        raise InvalidInput(f"must be {what}, got {str(value)[:40]!r}") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise InvalidInput(f"must be a finite number, got {value!r}")
    if whole and isinstance(number, float):
        if number != int(number):
            raise InvalidInput(f"must be a whole number, got {value!r}")
        number = int(number)
    return number


def check_number(
    name: str, value: object, *, whole: bool, minimum: float, maximum: float
) -> int | float:
    """`value` as an int (`whole`) or float, finite and within [minimum, maximum].

    Raises:
        InvalidInput: as `Range.check`.
    """
    return Range(minimum, maximum, whole=whole).check(name, value)


def normalize_workspace(path: str) -> str:
    """An absolute workspace path in one spelling: `/w/ws`, `/w/ws/` and `/w/./ws` are
    the same key for limits and filters. Lexical: symlinks are not followed, so the
    server never touches the file system to decide.

    Raises:
        InvalidInput: a relative path, an empty one, or one with a NUL byte.
    """
    if "\x00" in path:
        raise InvalidInput("workspace must not contain NUL bytes")
    if not path.startswith("/"):
        raise InvalidInput(
            f"workspace must be an absolute path, got {path[:200]!r} "
            "(the CLI resolves a relative one against the current directory)"
        )
    normal = os.path.normpath(path)
    # POSIX keeps a leading `//`; it names the same directory here.
    return "/" + normal.lstrip("/")


def parse_id(ref: str) -> str:
    """A task or attempt id (or id prefix) as slotline spells it: lower-case hex.

    A dashed UUID (`3f2a1b2c-…`, as Hephaestus clients keep ids) is the same 128 bits
    and becomes the 32-digit form; every surface that takes an id calls this.

    Raises:
        InvalidInput: the text is neither hex digits nor a dashed UUID.
    """
    text = ref.strip().lower()
    if _DASHED.match(text):
        return uuid.UUID(text).hex
    if not text or not _HEX.match(text) or len(text) > 32:
        raise InvalidInput(f"{ref[:80]!r} is not a task id (hex digits, or a dashed UUID)")
    return text
