"""What a store keeps of its configuration tables between transactions (settings, limits,
back-off, built once per version of the configuration): a change made through another
store of the same database is seen by the next claim and read, and what a caller does
with the settings it was given never changes what the store kept."""

from __future__ import annotations

from contextlib import closing

from slotline.store import SettingsChange, Store, open_store
from slotline.store.queries import dicts

from .conftest import ClaimFn, Clock, SubmitFn, titles


def test_a_change_made_elsewhere_is_seen_by_the_next_claim(
    store: Store, store_url: str, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given: a store that has read its configuration (a claim, a submit, a read)
    store.set_setting("max_concurrent", 1)
    for title in ("a", "b", "c"):
        submit(title, agent="claude")
    assert titles(claim()) == ["a"]
    assert store.settings()["max_concurrent"] == 1

    # When: another node raises the limit, then caps the agent type
    with closing(open_store(store_url)) as other:
        other.set_setting("max_concurrent", 3)
        # Then: the next claim here starts what the new limit allows
        assert titles(claim()) == ["b", "c"]
        assert store.settings()["max_concurrent"] == 3
        other.set_limit("agent", "claude", 1)
        assert [(lim.key, lim.max) for lim in store.settings().per_key] == [("agent", 1)]


def test_the_settings_a_caller_gets_are_its_own(store: Store) -> None:
    given = store.settings()
    given.values["max_concurrent"] = 99
    given["exempt_agents"].append("claude")  # a value within a value too
    assert store.settings()["max_concurrent"] != 99
    assert store.settings().limits.exempt_agents == frozenset()
    assert store.line().settings["exempt_agents"] == []


def test_a_change_in_the_same_transaction_is_read_back(store: Store) -> None:
    store.settings()  # kept
    # (apply_settings writes every part and reads the settings back in one transaction)
    answer = store.apply_settings(SettingsChange(settings={"max_concurrent": 5}))
    assert answer["max_concurrent"] == 5
    assert store.settings()["max_concurrent"] == 5


# A row of each configuration table, and a change of it: each insert, update and delete
# must bump the configuration's version (migrations 0022, 0024), or a store would go on
# with what it kept of the table (a migration that rebuilds a table must make its
# triggers again).
ROWS = {
    "settings": ("name, value", "'probe', '1'", "value = '2'"),
    "limits": ("key, value, max_running, origin", "'probe', '', 1, 'api'", "max_running = 2"),
    "rate_limits": (
        "key, value, max_starts, period, origin",
        "'probe', '', 1, 60, 'api'",
        "max_starts = 2",
    ),
    "agent_backoff": (
        "agent, level, cap, not_before, successes, since",
        "'probe', 1, 1, 0, 0, 0",
        "level = 2",
    ),
    "budgets": (
        "key, value, unit, amount, period, origin",
        "'probe', '', 'usd', 1, 60, 'api'",
        "amount = 2",
    ),
}


def test_every_change_of_a_configuration_table_bumps_its_version(store: Store) -> None:
    def version() -> int:
        with store._transaction(write=False) as tx:
            tx.cursor.execute("SELECT value AS config FROM counters WHERE name = 'config'")
            return int(dicts(tx.cursor)[0]["config"])

    for table, (columns, values, change) in ROWS.items():
        key = columns.split(",")[0]
        for statement in (
            f"INSERT INTO {table} ({columns}) VALUES ({values})",
            f"UPDATE {table} SET {change} WHERE {key} = 'probe'",
            f"DELETE FROM {table} WHERE {key} = 'probe'",
        ):
            before = version()
            with store._write() as tx:
                tx.cursor.execute(statement)
            assert version() > before, statement
