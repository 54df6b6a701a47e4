"""Loading named SQL from `sql/*.sql` and running it inside one transaction."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Protocol

from slotline.errors import SlotlineError, StoreError
from slotline.models import utcnow
from slotline.scheduler import policy

_NAME_LINE = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
# A parameter in either style (`:name`, `%(name)s`), to rename those of a fragment.
_ANY_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)|%\(([a-z_][a-z0-9_]*)\)s")
_COMMENT = re.compile(r"^\s*--.*$\n?", re.MULTILINE)
WHERE = "/*where*/"


def parse_queries(text: str) -> dict[str, str]:
    """Split a file of `-- name: x` sections into {name: sql}."""
    parts = _NAME_LINE.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"query {name} is defined twice")
        queries[name] = body.strip().rstrip(";")
    return queries


@cache
def load_queries(dialect: str) -> dict[str, str]:
    """The shared queries, in the parameter style of `dialect` ("sqlite" or "postgres")."""
    # queries.sql, then each other file of sql/ (one per feature), by name.
    folder = resources.files("slotline.store").joinpath("sql")
    files = sorted(
        (e for e in folder.iterdir() if e.name.endswith(".sql")),
        key=lambda e: (e.name != "queries.sql", e.name),
    )
    text = "\n".join(entry.read_text() for entry in files)
    queries = parse_queries(text.replace("{line_order}", policy.LINE_ORDER_SQL))
    if dialect == "postgres":
        queries = {name: _PARAM.sub(r"%(\1)s", sql) for name, sql in queries.items()}
    return queries


@dataclass
class Where:
    """The conditions of a composed query: named `where_*` fragments, joined by AND; the
    fragments of one `any` group by OR. Each use gets its own parameter names, so a
    fragment can be used several times (two labels, three statuses)."""

    groups: list[list[tuple[str, dict[str, Any]]]] = field(default_factory=list)

    def all(self, fragment: str, **params: Any) -> Where:
        self.groups.append([(fragment, params)])
        return self

    def any(self, fragment: str, values: Iterable[dict[str, Any]]) -> Where:
        group = [(fragment, params) for params in values]
        if group:
            self.groups.append(group)
        return self

    def compose(self, queries: Mapping[str, str], query: str) -> tuple[str, dict[str, Any]]:
        """The text of `query` with these conditions in place of its `/*where*/`, and
        their parameters (named `NAME_N`)."""
        params: dict[str, Any] = {}
        ands = []
        for group in self.groups:
            ors = []
            for fragment, values in group:
                n = len(params)

                def renamed(match: re.Match[str], n: int = n) -> str:
                    name = match.group(1) or match.group(2)
                    new = f"{name}_{n}"
                    return f":{new}" if match.group(1) else f"%({new})s"

                ors.append(_ANY_PARAM.sub(renamed, _COMMENT.sub("", queries[fragment])))
                params.update({f"{name}_{n}": value for name, value in values.items()})
            ands.append(" OR ".join(f"({text})" for text in ors))
        where = "".join(f" AND ({text})" for text in ands)
        return queries[query].replace(WHERE, where), params


class Cursor(Protocol):
    """The slice of DB-API both sqlite3 and psycopg cursors provide."""

    def execute(self, sql: Any, params: Any = ...) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def executemany(self, sql: Any, params_seq: Any, /) -> Any: ...


class Tx:
    """One open transaction: run named queries, get rows as dicts."""

    def __init__(
        self,
        cursor: Cursor,
        queries: Mapping[str, str],
        clock: Callable[[Cursor], float] | None = None,
    ) -> None:
        self.cursor = cursor
        self._cursor = cursor
        self._clock = clock
        # Whether committing wakes the watchers; a verb that changed nothing clears it,
        # so that a node is not woken by its own empty claims.
        self.notify = True
        # The id of a watcher the commit need not wake: the writer's own, when it knows
        # everything it changed (a node's claim).
        self.quiet_for: str | None = None
        self._queries = queries

    def now(self) -> float:
        """The store's clock in epoch seconds: the database server's on PostgreSQL, where
        nodes on several machines must agree on leases; this machine's on SQLite."""
        return utcnow() if self._clock is None else self._clock(self._cursor)

    def rows(self, query: str, /, **params: Any) -> list[dict[str, Any]]:
        self._cursor.execute(self._queries[query], params)
        return [dict(row) for row in self._cursor.fetchall()]

    def iter_rows(
        self, query: str, /, page: int = 8, max_page: int = 512, **params: Any
    ) -> Iterator[dict[str, Any]]:
        """Rows of a query with `:limit`/`:offset`, fetched lazily in growing pages: a
        reader that needs only the first few rows (a claim filling one slot) reads few."""
        offset = 0
        while True:
            batch = self.rows(query, limit=page, offset=offset, **params)
            yield from batch
            if len(batch) < page:
                return
            offset += page
            page = min(page * 8, max_page)

    def select(self, query: str, where: Where, /, **params: Any) -> list[dict[str, Any]]:
        """Rows of a composed query: `query` with the conditions of `where`."""
        sql, more = where.compose(self._queries, query)
        self._cursor.execute(sql, {**params, **more})
        return [dict(row) for row in self._cursor.fetchall()]

    def one(self, query: str, /, **params: Any) -> dict[str, Any] | None:
        found = self.rows(query, **params)
        return found[0] if found else None

    def run(self, query: str, /, **params: Any) -> None:
        """Run a statement whose result nobody reads: on PostgreSQL it is sent with the
        transaction's next read or its commit, not in a round trip of its own."""
        self._cursor.execute(self._queries[query], params)

    def run_many(self, query: str, rows: Sequence[Mapping[str, Any]], /) -> None:
        """Run a query once per row of parameters, as one statement (`executemany`)."""
        if rows:
            self._cursor.executemany(self._queries[query], rows)

    @contextlib.contextmanager
    def part(self) -> Iterator[None]:
        """A part of the transaction that a `SlotlineError` undoes alone (a savepoint):
        the error propagates, the rest of the transaction stands."""
        self._cursor.execute("SAVEPOINT one_part")
        try:
            yield
        except SlotlineError as exc:
            if not isinstance(exc, StoreError):
                self._cursor.execute("ROLLBACK TO SAVEPOINT one_part")
            raise
        self._cursor.execute("RELEASE SAVEPOINT one_part")


def split_statements(script: str) -> list[str]:
    """The statements of a migration script: each ends with a `;` at the end of a line,
    except inside a trigger body (`BEGIN` … `END;`, SQLite) or a dollar-quoted function
    body (`$$` … `$$`, PostgreSQL), whose own statements end with `;` too. Comment lines
    are dropped (a `;` may appear in them, never inside a literal)."""
    statements: list[str] = []
    lines: list[str] = []
    in_dollar = in_begin = False
    for line in script.splitlines():
        text = line.strip()
        if not text or text.startswith("--"):
            continue
        lines.append(line)
        if text.count("$$") % 2:
            in_dollar = not in_dollar
        if not in_dollar:
            if text.upper().endswith("BEGIN"):
                in_begin = True
            elif in_begin and text.upper() == "END;":
                in_begin = False
        if text.endswith(";") and not in_dollar and not in_begin:
            statements.append("\n".join(lines).strip().removesuffix(";").strip())
            lines = []
    if lines:
        statements.append("\n".join(lines).strip())
    return statements
