"""Fresh PostgreSQL schemas for tests: a URL to an empty one, dropped afterwards."""

from __future__ import annotations

import contextlib
import re
import secrets
from collections.abc import Iterator


@contextlib.contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """`url` (a test database's, with or without `?schema=`) to a new, empty schema of
    that database; the schema is dropped on the way out."""
    import psycopg

    from slotline.store.pg_url import split_url

    schema = "t_" + secrets.token_hex(6)
    base = re.sub(r"[?&]schema=\w+", "", url)
    yield f"{base}{'&' if '?' in base else '?'}schema={schema}"
    with psycopg.connect(split_url(base)[0], autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
