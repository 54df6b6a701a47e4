"""The SQL text of the store: the named queries of `sql/*.sql` in each dialect, the
composed ones (`Where`), the reads sent together (`Read`), and a migration script's
statements."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from slotline.scheduler import policy

_NAME_LINE = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")
# A parameter in either style (`:name`, `%(name)s`), to rename those of a fragment.
_ANY_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)|%\(([a-z_][a-z0-9_]*)\)s")
_COMMENT = re.compile(r"^\s*--.*$\n?", re.MULTILINE)
WHERE = "/*where*/"
# NO KEY: what an update that changes no key takes; it does not block the inserts of rows
# that refer to the locked one.
_ROW_LOCKS = {
    "{for_update}": "FOR NO KEY UPDATE",
    "{skip_locked}": "FOR NO KEY UPDATE SKIP LOCKED",
}
# `column {in_ids:NAME}`: the column is one of the values of the parameter NAME, an `Ids`.
_IN_IDS = re.compile(r"\{in_ids:([a-z_]+)\}")
_IN_IDS_SQL = {
    # One array parameter (the statement can be prepared), sent in binary: psycopg's text
    # form escapes each value with a regular expression.
    "postgres": r"= ANY(%(\1)b)",
    "sqlite": r"IN (SELECT value FROM json_each(:\1))",  # the values as a JSON array
}


class Ids(tuple[str, ...]):
    """The values of an `{in_ids:NAME}` parameter: one parameter however many values,
    so that a statement reading several rows by id is one text, prepared once
    (PostgreSQL: an array; SQLite: its JSON). Hashable, as a read's parameters are
    (`Tx.preload`)."""

    def as_json(self) -> str:
        return json.dumps(list(self))


def _renamed(fragment: str, values: Mapping[str, Any], n: int) -> tuple[str, dict[str, Any]]:
    """`fragment` with each parameter NAME renamed NAME_n, and their values; a tuple is a
    list of values (`IN (:ids)`), one parameter NAME_n_i for each.

    Raises:
        ValueError: an empty tuple (`IN ()` is an error on PostgreSQL, no rows on
            SQLite): the caller asks for nothing and should not run the query.
    """
    if any(value == () for value in values.values()):
        raise ValueError(f"an empty list of values for {fragment!r}")
    names = {
        name: [f"{name}_{n}_{i}" for i in range(len(value))]
        if isinstance(value, tuple)
        else [f"{name}_{n}"]
        for name, value in values.items()
    }

    def rename(match: re.Match[str]) -> str:
        style = ":{}" if match[1] else "%({})s"
        return ", ".join(style.format(new) for new in names[match[1] or match[2]])

    params: dict[str, Any] = {}
    for name, value in values.items():
        items = value if isinstance(value, tuple) else (value,)
        params.update(zip(names[name], items, strict=True))
    return _ANY_PARAM.sub(rename, _COMMENT.sub("", fragment)), params


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
    text = text.replace("{line_order}", policy.LINE_ORDER_SQL)
    # Row locks (SQLite has one writer at a time: it needs none): `{for_update}` locks the
    # rows read until the transaction ends, `{skip_locked}` too but passes over rows
    # another transaction holds instead of waiting for them.
    for placeholder, lock in _ROW_LOCKS.items():
        text = text.replace(placeholder, lock if dialect == "postgres" else "")
    text = _IN_IDS.sub(_IN_IDS_SQL[dialect], text)
    queries = parse_queries(text)
    if dialect == "postgres":
        queries = {name: _PARAM.sub(r"%(\1)s", sql) for name, sql in queries.items()}
    return queries


class Composed(str):
    """The text of a composed query (`Where.compose`). PostgreSQL plans it anew at each
    run, for its parameters: its conditions vary from one use to the next, and a plan
    kept from the first runs, when a table was still small (a sequential scan), would
    be kept as the table grows."""


@dataclass
class Where:
    """The conditions of a composed query: named `where_*` fragments, joined by AND; the
    fragments of one `any` group by OR. Each use gets its own parameter names, so a
    fragment can be used several times (two labels, three statuses). A tuple parameter
    is a list (`id IN (:ids)`): one condition an index scan answers, where equalities
    joined by OR need a bitmap scan on PostgreSQL (off in write transactions)."""

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
                text, renamed = _renamed(queries[fragment], values, len(params))
                ors.append(text)
                params.update(renamed)
            ands.append(" OR ".join(f"({text})" for text in ors))
        where = "".join(f" AND ({text})" for text in ands)
        return Composed(queries[query].replace(WHERE, where)), params


@dataclass(frozen=True, slots=True)
class Read:
    """One of several reads sent together (`Tx.read_together`): a named query, composed
    with the conditions of `where` if it has a `/*where*/`.

    `by_index`: PostgreSQL plans it once, with sequential scans off, and keeps that plan
    (`store/pg_pipeline.py`), when it is read together with others (`Tx.read_together`,
    `Tx.prefetch`, or ahead with the transaction's first round trip). For a read of a few
    rows by key whose generic plan, made while its tables were small, would otherwise be
    a sequential scan, kept as they grow. Only where an index answers the whole read;
    never a composed one (its text varies: it is planned at each run)."""

    query: str
    params: Mapping[str, Any] = field(default_factory=dict)
    where: Where | None = None
    by_index: bool = False

    def __post_init__(self) -> None:
        if self.by_index and self.where is not None:
            raise ValueError(f"{self.query}: a composed read is planned at each run, not by index")


def statement(queries: Mapping[str, str], read: Read) -> tuple[str, Mapping[str, Any]]:
    """The text and parameters of `read`."""
    if read.where is None:
        return queries[read.query], read.params
    sql, more = read.where.compose(queries, read.query)
    return sql, {**read.params, **more}


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
