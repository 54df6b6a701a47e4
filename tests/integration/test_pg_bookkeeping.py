"""A node's own bookkeeping on PostgreSQL waits for no other node's claim.

A heartbeat (the node's liveness and its runs' leases), its runs' usage, an external
runner's lease renewal and the line's samples decide nothing about who runs: they take
none of the store's locks (`Serial.ROWS`), and the heartbeat passes over a run another
transaction is ending rather than wait for it (and perhaps deadlock with it: a claim
ends the same node's runs in another order). Here a session holds the write lock and one
run's row, as a long claim ending that run would.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from slotline.errors import StaleAttempt
from slotline.models import Status
from slotline.store import Store, open_store
from slotline.store.pg_url import lock_key, split_url
from waiting import until

pytestmark = pytest.mark.postgres

# Far above what a write takes, far below the store's lock timeout (60 s): a call still
# running then waits for the held locks.
BOUND_S = 20.0


def test_bookkeeping_goes_through_while_a_claim_holds_the_write_lock_and_a_run(
    pg_store: Store, pg_url: str
) -> None:
    # Given a node with two runs,
    store = pg_store
    store.register_node("n1")
    store.submit_many([{"command": ["true"]} for _ in range(2)])
    ending, other = store.claim("n1").claims
    conninfo, schema = split_url(pg_url)
    # (the pool is shut down after the holder lets go: a call still waiting then ends)
    with ThreadPoolExecutor(1) as pool, psycopg.connect(conninfo) as holder:
        # while another session holds the write lock and the row of the run it ends,
        holder.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key(schema)])
        holder.execute(
            f'SELECT 1 FROM "{schema}".attempts WHERE id = %s FOR UPDATE', [ending.attempt.id]
        )

        def done(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            return pool.submit(call, *args, **kwargs).result(timeout=BOUND_S)

        # the node's heartbeat goes through and renews every lease but the one being ended,
        done(store.heartbeat, "n1", lease=1000.0)
        leases = done(_leases, store)
        assert leases[ending.attempt.id] == ending.attempt.lease_expires_at
        assert leases[other.attempt.id] > ending.attempt.lease_expires_at + 900
        # and so do its runs' usage, an external runner's renewal and a sample.
        done(store.record_usage, {other.attempt.id: (12.5, 4096), ending.attempt.id: (1.0, 1)})
        done(store.renew_attempt, other.attempt.id, other.attempt.token, lease=2000.0)
        done(store.record_sample, 60.0)
        assert done(_leases, store)[other.attempt.id] > ending.attempt.lease_expires_at + 1900
        holder.rollback()

    usage = {a.id: a.peak_rss_bytes for a in store.live_attempts("n1")}
    assert usage == {other.attempt.id: 4096, ending.attempt.id: None}


def _leases(store: Store) -> dict[str, float | None]:
    return {a.id: a.lease_expires_at for a in store.live_attempts("n1")}


def test_a_lease_renewal_racing_the_runs_end_is_refused_as_stale(
    pg_store: Store, pg_url: str
) -> None:
    # Given an external runner's run, whose row another session holds as it ends it,
    store = pg_store
    store.submit({"command": ["true"]})
    (run,) = store.claim("n1").claims
    conninfo, schema = split_url(pg_url)
    with ThreadPoolExecutor(1) as pool, psycopg.connect(conninfo) as holder:
        holder.execute(
            f'SELECT 1 FROM "{schema}".attempts WHERE id = %s FOR UPDATE', [run.attempt.id]
        )
        # when the runner renews its lease meanwhile (it waits for that row),
        renewal = pool.submit(store.renew_attempt, run.attempt.id, run.attempt.token, 600.0)
        until(lambda: _waiting_for_a_row(holder), what="the renewal waiting for the row")
        holder.execute(
            f'UPDATE "{schema}".attempts SET finished_at = 1 WHERE id = %s', [run.attempt.id]
        )
        holder.commit()
        # then the renewal is refused, not reported as made.
        with pytest.raises(StaleAttempt):
            renewal.result(timeout=BOUND_S)


def _waiting_for_a_row(holder: psycopg.Connection[Any]) -> bool:
    """Whether a session waits for a row `holder`'s transaction has locked."""
    (count,) = holder.execute(
        "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'"
        " AND transactionid = (SELECT backend_xid FROM pg_stat_activity"
        " WHERE pid = pg_backend_pid())"
    ).fetchone() or (0,)
    return bool(count)


def test_a_reaper_waits_for_a_renewal_under_way_and_then_sees_it(
    pg_store: Store, pg_url: str
) -> None:
    # Given a run whose lease and node have lapsed (as the store's clock will say),
    store = pg_store
    store.submit({"command": ["true"]})
    (run,) = store.claim("n1").claims
    later = run.attempt.started_at + 10_000
    conninfo, schema = split_url(pg_url)
    with ThreadPoolExecutor(1) as pool, psycopg.connect(conninfo) as renewer:
        # while another session renews its lease, not yet committed (as a heartbeat),
        renewer.execute(
            f'UPDATE "{schema}".attempts SET lease_expires_at = %s WHERE id = %s',
            [later + 600, run.attempt.id],
        )
        reaping = pool.submit(
            store.finish, run.attempt.id, run.attempt.token, None, "reaped",
            now=later, reap_after=1.0,
        )  # fmt: skip
        # a reaper checks the lease only once that renewal is in,
        until(lambda: _waiting_for_a_row(renewer), what="the reaper waiting for the row")
        renewer.commit()
        # and so does not reap a run whose lease was just renewed.
        with pytest.raises(StaleAttempt, match="alive"):
            reaping.result(timeout=BOUND_S)
    assert store.get(run.task.id).status is Status.RUNNING


def test_writes_from_short_lived_processes_fold_the_count_deltas(
    pg_store: Store, pg_url: str
) -> None:
    """A store folds the per-status count deltas at its first write and once in a while
    after: a CLI command, which opens a store for one write, folds too, so deltas do not
    pile up under every read of the counts while no node runs."""
    tasks = pg_store.submit_many([{"command": ["true"]} for _ in range(5)])
    conninfo, schema = split_url(pg_url)
    for task in tasks:
        cli = open_store(pg_url)  # as each `slotline cancel` does
        try:
            cli.cancel(task.id)
        finally:
            cli.close()
        with psycopg.connect(conninfo, autocommit=True) as conn:
            row = conn.execute(f'SELECT COUNT(*) FROM "{schema}".status_deltas').fetchone()
        assert row == (0,)
    assert pg_store.counts() == {"cancelled": 5}
