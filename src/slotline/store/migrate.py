"""The migration runner, shared by both backends: numbered scripts per dialect under
`sql/migrations/DIALECT/NNNN_name.sql`, applied in order inside one write transaction,
each recorded in `schema_version`."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from slotline.errors import SchemaTooNew
from slotline.store.queries import Tx, dicts
from slotline.store.statements import split_statements

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

# Not named queries: DDL cannot be prepared, and these run before the schema exists.
_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
_VERSION_GET = "SELECT MAX(version) AS version FROM schema_version"
_VERSION_ADD = {
    "sqlite": "INSERT INTO schema_version (version) VALUES (:version)",
    "postgres": "INSERT INTO schema_version (version) VALUES (%(version)s)",
}


def migrations(dialect: str) -> list[tuple[int, str]]:
    """Numbered migration scripts of `dialect`, in order."""
    return [(version, entry.read_text()) for version, entry in _scripts(dialect)]


def _scripts(dialect: str) -> list[tuple[int, Traversable]]:
    """The migration files of `dialect` by number, in order, unread: a store opened at
    the latest version (every CLI command) reads none of them."""
    folder = resources.files("slotline.store").joinpath(f"sql/migrations/{dialect}")
    found = [
        (int(entry.name.split("_", 1)[0]), entry)
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    ]
    return sorted(found, key=lambda item: item[0])


def migrate(tx: Tx, dialect: str, where: str) -> None:
    """Apply the scripts newer than the store's schema, in the caller's write transaction
    (so two nodes starting at once migrate one after the other).

    Raises:
        SchemaTooNew: the store at `where` was migrated by a newer slotline.
    """
    cur = tx.cursor
    cur.execute(_VERSION_TABLE)
    cur.execute(_VERSION_GET)
    current = int(dicts(cur)[0]["version"] or 0)
    scripts = _scripts(dialect)
    known = scripts[-1][0] if scripts else 0
    if current > known:
        raise SchemaTooNew(
            f"the store at {where} has schema version {current}; this slotline knows up "
            f"to {known}. Upgrade slotline."
        )
    for version, entry in scripts:
        if version > current:
            for statement in split_statements(entry.read_text()):
                cur.execute(statement)
            cur.execute(_VERSION_ADD[dialect], {"version": version})
