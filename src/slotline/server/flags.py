"""The booleans of requests: `true` or `false`, never `"yes"`, `0` or `1`.

Pydantic's lax mode takes `"yes"`, `"on"`, `1` or `0` for a boolean; a client that
sends one meant something the docs do not promise, so every boolean of a body or a
query is strict and anything else is 422, as numbers given as text are.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, StrictBool

# A boolean of a JSON body: JSON `true` or `false`.
Flag = StrictBool


def _query_flag(value: object) -> object:
    """A query string holds text: only `true` and `false` are booleans there."""
    if isinstance(value, bool) or value in ("true", "false"):
        return value == "true" if isinstance(value, str) else value
    raise ValueError("must be true or false")


# A boolean of a query string: `true` or `false`.
QueryFlag = Annotated[bool, BeforeValidator(_query_flag)]
