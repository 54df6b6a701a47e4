"""What a PostgreSQL store keeps of its configuration tables between transactions: the
rows of the version it read, never rows of another version under the same number."""

from __future__ import annotations

from slotline.store.queries import ConfigCache


def test_rows_are_kept_while_the_version_stays_and_replaced_by_a_newer_one() -> None:
    cache = ConfigCache()
    assert cache.at(None) is None
    five = cache.at(5)
    assert five is not None
    five.rows["settings_all"] = [{"name": "paused", "value": "false"}]
    assert cache.at(5) is five
    six = cache.at(6)
    assert six is not None
    assert six.rows == {}
    assert cache.at(6) is six


def test_an_older_version_forgets_what_was_kept() -> None:
    # (a database restored from a backup counts up again to numbers seen before)
    cache = ConfigCache()
    seven = cache.at(7)
    assert seven is not None
    seven.rows["limits_all"] = []
    older = cache.at(3)
    assert older is not None
    assert older is not seven
    again = cache.at(7)
    assert again is not None
    assert again is not seven
    assert again.rows == {}
