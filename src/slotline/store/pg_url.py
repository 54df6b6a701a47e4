"""A PostgreSQL store's URL: the libpq connection string, slotline's `?schema=NAME` (so
several queues can share one database), the URL as messages show it (no password), and
the keys of the schema's advisory locks."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from slotline.errors import InvalidInput

DEFAULT_SCHEMA = "public"

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def split_url(url: str) -> tuple[str, str]:
    """The libpq conninfo of `url` without slotline's `schema` parameter, and the schema.

    Raises:
        InvalidInput: the schema name is not a plain lower-case identifier.
    """
    parts = urlsplit(url)
    params = parse_qsl(parts.query, keep_blank_values=True)
    schemas = [value for key, value in params if key == "schema"]
    if len(schemas) > 1:
        raise InvalidInput(f"give ?schema= once in the store URL, not {len(schemas)} times")
    schema = schemas[0] if schemas else DEFAULT_SCHEMA
    if not _SCHEMA_NAME.match(schema) or schema.startswith("pg_"):
        raise InvalidInput(
            f"schema {schema!r} in the store URL must be 1-63 lower-case letters, digits or _, "
            "start with a letter or _, and not start with pg_"
        )
    rest = urlencode([(k, v) for k, v in params if k != "schema"], quote_via=quote)
    return urlunsplit(parts._replace(query=rest)), schema


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs: in its authority
    (`user:PASSWORD@`) or its query (`?password=`, as libpq also reads it)."""
    parts = urlsplit(url)
    if parts.password is not None:
        url = url.replace(f":{parts.password}@", ":***@", 1)
    return re.sub(r"(?i)([?&]password=)[^&#]*", r"\1***", url)


def lock_key(schema: str, lock: str = "") -> int:
    """The key of one of a schema's advisory locks (the write lock, "submits" or
    "events"): a signed 64-bit hash of their names."""
    name = f"slotline:{schema}" + (f":{lock}" if lock else "")
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
