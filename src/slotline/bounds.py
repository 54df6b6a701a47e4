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

from slotline.errors import InvalidInput

# Sequence numbers, offsets and positions: SQLite stores 64-bit integers.
MAX_INT = 2**62
# Counts: max_concurrent, per-key limits, max_depth, max_children, max_queue_size.
MAX_COUNT = 1_000_000_000
# Durations in seconds (timeout, queue_ttl, expected_duration, aging_interval…): ten years.
MAX_SECONDS = 10 * 366 * 86400.0
# Labels: how many a task may carry and how long a value may be.
MAX_LABELS = 64
MAX_LABEL_VALUE = 1024
# A function task's result, as JSON: larger ones fail the attempt, saying so.
MAX_RESULT_BYTES = 1024 * 1024

_HEX = re.compile(r"^[0-9a-f]+$")
_DASHED = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def check_number(
    name: str, value: object, *, whole: bool, minimum: float, maximum: float
) -> int | float:
    """`value` as an int (`whole`) or float, finite and within [minimum, maximum].

    Raises:
        InvalidInput: not a number, not whole when it must be, infinite, NaN or out of
            range; the message names `name` and the range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"{name} must be a number, got {value!r}")
    try:
        number: int | float = int(value) if whole and not isinstance(value, float) else float(value)
    except (ValueError, OverflowError):
        what = "a whole number" if whole else "a number"
        raise InvalidInput(f"{name} must be {what}, got {str(value)[:40]!r}") from None
    if isinstance(number, float) and not math.isfinite(number):
        raise InvalidInput(f"{name} must be a finite number, got {value!r}")
    if whole and isinstance(number, float):
        if number != int(number):
            raise InvalidInput(f"{name} must be a whole number, got {value!r}")
        number = int(number)
    if not minimum <= number <= maximum:
        raise InvalidInput(f"{name} must be between {minimum:g} and {maximum:g}, got {number:g}")
    return number


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
