"""A heartbeat says whether it renewed every lease of its node's runs: a node tells its
keepers that their leases were renewed (`slotline.fencing`) only when it did."""

from __future__ import annotations

import psycopg
import pytest

from slotline.store import Store
from slotline.store.pg_url import split_url


def test_a_heartbeat_renews_every_run_of_its_node(store: Store) -> None:
    store.submit({"command": ["true"]})
    store.submit({"command": ["true"]})
    assert len(store.claim("n1").claims) == 2
    assert store.heartbeat("n1", lease=30.0) is True
    assert all(a.lease_expires_at is not None for a in store.live_attempts("n1"))


@pytest.mark.postgres
def test_a_heartbeat_that_passes_over_a_run_being_ended_says_so(
    pg_store: Store, pg_url: str
) -> None:
    # Given a node running two tasks, one of whose attempt rows another transaction holds
    # (a reaper, or the node's own end of it),
    pg_store.submit({"command": ["true"]})
    pg_store.submit({"command": ["true"]})
    first, _ = pg_store.claim("n1", lease=30.0).claims
    conninfo, schema = split_url(pg_url)
    with psycopg.connect(conninfo) as conn:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute("SELECT id FROM attempts WHERE id = %s FOR UPDATE", [first.attempt.id])
        # the heartbeat renews the other, passes it over and says it did not renew all,
        assert pg_store.heartbeat("n1", lease=60.0) is False
        conn.rollback()
    # and once the row is free, it renews every lease again.
    assert pg_store.heartbeat("n1", lease=60.0) is True
