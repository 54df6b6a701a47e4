"""Backend mechanics every store must get right: ids, slots, event numbering, wake-ups."""

from __future__ import annotations

import asyncio
import re
import secrets
import select
import socket
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from itertools import pairwise
from pathlib import Path

import psycopg
import pytest

from schemas import fresh_schema
from slotline.errors import InvalidInput, StoreError, UnknownDependency
from slotline.models import ResumedFrom, Status, Usage
from slotline.store import Report, Store, open_store
from slotline.store import sqlite as sqlite_backend
from slotline.store.pg_commit import FOLD_EVERY
from slotline.store.pg_url import split_url
from slotline.store.statements import load_queries

COMMAND = {"command": ["true"]}


@contextmanager
def opened(url: str) -> Iterator[Store]:
    store = open_store(url)
    try:
        yield store
    finally:
        store.close()


def positional(query: str) -> str:
    """A psycopg query with its %(name)s (or binary %(name)b) parameters numbered $1, $2…
    as PREPARE wants."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)[sb]", number, query)


def test_a_task_is_found_by_a_prefix_of_its_id(store: Store) -> None:
    task = store.submit({"command": ["echo", "hi"], "title": "hello", "agent": "claude"})

    found = store.get(task.id[:6])

    assert found.id == task.id
    assert (found.title, found.agent, found.command) == ("hello", "claude", ("echo", "hi"))
    assert found.status is Status.QUEUED
    assert found.position == 1


def test_claim_fills_free_slots_up_to_max_concurrent_and_finish_frees_one(store: Store) -> None:
    store.set_setting("max_concurrent", 2)
    first, second, third = (store.submit({**COMMAND, "title": t}) for t in "abc")

    claimed = store.claim("node-a").claims

    assert [c.task.id for c in claimed] == [first.id, second.id]
    assert store.claim("node-b").claims == []
    # When one attempt finishes, its slot goes to the next in line.
    done = store.finish(claimed[0].attempt.id, claimed[0].attempt.token, 0)
    assert done.status is Status.SUCCEEDED
    assert [c.task.id for c in store.claim("node-b").claims] == [third.id]
    assert store.status().active == 2


def test_a_node_sees_the_limits_another_node_changed_at_its_next_claim(store_url: str) -> None:
    # Given two nodes' stores, one of which has claimed (and so read the settings) once
    with opened(store_url) as node, opened(store_url) as admin:
        admin.set_setting("max_concurrent", 1)
        for title in "abcd":
            admin.submit({**COMMAND, "title": title})
        assert len(node.claim("node-a").claims) == 1
        # When the other changes the limits, the next claim goes by the new ones
        admin.set_setting("max_concurrent", 3)
        assert len(node.claim("node-a").claims) == 2
        admin.set_limit("agent", None, 0)
        admin.submit({**COMMAND, "agent": "x"})
        admin.set_setting("max_concurrent", 10)
        assert len(node.claim("node-a").claims) == 1  # the last untyped task, not x's
        # and a change made in the claiming transaction's own store object is seen too
        node.set_limit("agent", None, 1)
        assert [c.task.agent for c in node.claim("node-a").claims] == ["x"]


def test_the_counts_per_status_follow_submits_claims_and_finishes(store: Store) -> None:
    # Enough submits one by one that a PostgreSQL store folds its count deltas while
    # no claim runs (every FOLD_EVERY-th submit), then claims and finishes, which fold
    # them too.
    store.set_setting("max_concurrent", 3)
    for _ in range(2 * FOLD_EVERY + 1):
        store.submit(COMMAND)
    assert store.counts() == {"queued": 2 * FOLD_EVERY + 1}
    claims = store.claim("node-a").claims
    assert store.counts() == {"queued": 2 * FOLD_EVERY - 2, "running": 3}
    store.finish(claims[0].attempt.id, claims[0].attempt.token, 0)
    store.finish(claims[1].attempt.id, claims[1].attempt.token, 1)
    assert store.counts() == {
        "queued": 2 * FOLD_EVERY - 2,
        "running": 1,
        "succeeded": 1,
        "failed": 1,
    }
    assert store.status().active == 1


def test_the_counts_of_one_user_are_of_their_tasks_only(store: Store) -> None:
    for user in ("ann", "ann", "bob"):
        store.submit({**COMMAND, "user": user})
    store.claim("node-a", limit=1)  # ann's first

    assert store.counts("ann") == {"queued": 1, "running": 1}
    assert store.counts("bob") == {"queued": 1}
    assert store.counts("nobody") == {}


def test_what_a_run_spent_is_recorded_on_its_attempt(store: Store) -> None:
    task = store.submit(COMMAND)
    claim = store.claim("node-a").claims[0]
    spent = Usage(cost_usd=0.25, input_tokens=1200, output_tokens=None)

    store.finish(claim.attempt.id, claim.attempt.token, 0, usage=spent, session_id="s-1")

    attempt = store.get(task.id).attempts[0]
    assert attempt.usage == spent
    assert attempt.session_id == "s-1"
    shown = attempt.to_dict()
    assert shown["usage"] == {
        "cost_usd": 0.25, "input_tokens": 1200, "output_tokens": None, "session_totals": None,
    }  # fmt: skip
    assert shown["session_id"] == "s-1"


def test_a_run_that_continues_a_session_records_what_it_added(store: Store) -> None:
    # Given a run that printed its session's running totals, then was interrupted
    task = store.submit(COMMAND)
    first = store.claim("node-a").claims[0].attempt
    printed = {"cost_usd": 0.104, "input_tokens": 500, "output_tokens": 29}
    store.finish(first.id, first.token, None, requeue=True, usage=Usage(0.104, 500, 29, printed))

    # When the next attempt continues that session and prints the totals since it began
    second = store.claim("node-a").claims[0].attempt
    store.record_start(second.id, second.token, None, resumed_from=ResumedFrom(task.id, 1))
    totals = {"cost_usd": 0.21, "input_tokens": 1400, "output_tokens": 70}
    store.finish(second.id, second.token, 0, usage=Usage(0.21, 1400, 70, totals))

    # Then it records only what it added, its tokens whole numbers, beside those totals
    one, two = store.get(task.id).attempts
    assert one.usage == Usage(0.104, 500, 29, printed)
    assert two.usage is not None
    assert two.usage.cost_usd == pytest.approx(0.106)
    assert (two.usage.input_tokens, two.usage.output_tokens) == (900, 41)
    assert isinstance(two.usage.input_tokens, int)
    assert two.to_dict()["usage"]["session_totals"] == totals


def test_event_seq_strictly_increases_and_readers_resume_after_a_seq(store: Store) -> None:
    tasks = store.submit_many([COMMAND, COMMAND, COMMAND])
    for claim in store.claim("node-a").claims:
        store.finish(claim.attempt.id, claim.attempt.token, 0)
    store.cancel(store.submit(COMMAND).id)

    events = store.events()

    seqs = [e.seq for e in events]
    assert len(seqs) >= 2 * len(tasks) + 2
    assert all(a < b for a, b in pairwise(seqs))
    assert store.last_seq() == seqs[-1]
    assert [e.seq for e in store.events(since=seqs[3])] == seqs[4:]


def test_the_events_of_one_claim_are_numbered_in_the_order_it_made_them(store: Store) -> None:
    store.set_setting("max_concurrent", 4)
    store.submit_many([COMMAND] * 4)
    first = store.claim("node-a").claims
    seq = store.last_seq()
    for claim in first[:3]:
        store.finish(claim.attempt.id, claim.attempt.token, 0)
    store.submit_many([COMMAND] * 3)
    ended = first[3].attempt
    reports = [Report(ended.id, ended.token, 0, None, False)]
    claims = store.claim("node-a", finished=reports).claims

    events = [(e.kind, e.task_id) for e in store.events(since=seq)]
    claimed = [("claimed", c.task.id) for c in claims]
    assert events[-len(claimed) :] == claimed
    assert ("succeeded", first[3].task.id) in events[: -len(claimed)]


def statements(dialect: str) -> dict[str, str]:
    """The named queries, a condition (`TABLE_where_…`) as a query on its table."""
    found = {}
    for name, query in load_queries(dialect).items():
        table, where, _ = name.partition("_where_")
        found[name] = f"SELECT 1 FROM {table} WHERE ({query}\n)" if where else query
    return found


def test_every_named_query_compiles_on_the_backend(store_url: str) -> None:
    # Given a migrated store, every query of sql/queries.sql is parsed and planned by the
    # database itself (nothing runs), so a dialect slip fails here, not in production.
    with opened(store_url):
        pass
    if store_url.startswith("postgresql://"):
        conninfo, schema = split_url(store_url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            for name, query in statements("postgres").items():
                conn.execute(f"PREPARE q_{name} AS {positional(query)}")
                conn.execute(f"DEALLOCATE q_{name}")
    else:
        with closing(sqlite3.connect(store_url)) as conn:
            for query in statements("sqlite").values():
                names = re.findall(r"(?<![:\w]):([a-z_][a-z0-9_]*)", query)
                conn.execute("EXPLAIN " + query, dict.fromkeys(names))


def test_watcher_wakes_on_a_change_made_through_another_store_object(store_url: str) -> None:
    with opened(store_url) as first, opened(store_url) as second:
        watcher = first.watcher()

        async def scenario() -> None:
            # Nothing changed yet: the wait times out.
            assert await watcher.wait(0.05) is False
            # A change committed between two waits is not lost.
            await asyncio.to_thread(second.submit, COMMAND)
            assert await watcher.wait(10) is True
            # A change committed while waiting wakes the waiter.
            waiting = asyncio.create_task(watcher.wait(10))
            # The loop goes idle only once the waiter is parked on its socket: still
            # waiting then, with nothing pending, it is woken by the commit alone.
            done, _ = await asyncio.wait({waiting}, timeout=0.1)
            assert not done
            await asyncio.to_thread(second.submit, COMMAND)
            assert await asyncio.wait_for(waiting, 15) is True

        try:
            asyncio.run(scenario())
        finally:
            watcher.close()


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
def test_a_wait_cancelled_as_a_change_arrives_ends_at_once(store_url: str, turns: int) -> None:
    # The node's loop waits on its watcher and on its own runs at once, and cancels the
    # watcher's wait when a run ends first. A change may arrive in the same turn of the
    # event loop: the cancellation must still end the wait (it once waited out its whole
    # timeout, stalling dispatch for seconds).
    with opened(store_url) as first, opened(store_url) as second:
        watcher = first.watcher()

        async def scenario() -> None:
            await asyncio.to_thread(second.submit, COMMAND)
            assert await watcher.wait(10) is True
            waiting = asyncio.create_task(watcher.wait(30))
            done, _ = await asyncio.wait({waiting}, timeout=0.1)
            assert not done  # parked on its socket
            # The change is committed and readable while the loop is blocked, so the
            # wait sees it in the same turns as the cancellation below (how many turns
            # apart: every order). It is the node's own claim, which PostgreSQL still
            # delivers to this watcher, for it to skip.
            if first.dialect == "postgres":
                second.claim("node-1", watcher=watcher.id)
            else:
                second.submit(COMMAND)
            assert _readable(watcher, 15)
            for _ in range(turns):
                await asyncio.sleep(0)
            waiting.cancel()
            # Ended at once: cancelled, or woken by the change if that came first.
            async with asyncio.timeout(5):
                await asyncio.wait({waiting})
            assert waiting.cancelled() or waiting.result() is True

        try:
            asyncio.run(scenario())
        finally:
            watcher.close()


def _readable(watcher: object, timeout: float) -> bool:
    """Whether the watcher's socket has data within `timeout`, without running the loop."""
    sock = getattr(watcher, "_sock", None) or watcher._conn  # type: ignore[attr-defined]
    readable, _, _ = select.select([sock.fileno()], [], [], timeout)
    return bool(readable)


def test_a_rolled_back_write_wakes_no_watcher(store_url: str) -> None:
    with opened(store_url) as first, opened(store_url) as second:
        watcher = first.watcher()

        async def scenario() -> None:
            with pytest.raises(UnknownDependency):
                await asyncio.to_thread(second.submit, {**COMMAND, "depends_on": ["abcdef"]})
            assert await watcher.wait(0.3) is False

        try:
            asyncio.run(scenario())
        finally:
            watcher.close()
        assert second.list_tasks() == []


def test_a_wake_up_that_cannot_be_sent_fails_no_committed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a SQLite store with a watcher, in a process out of file descriptors,
    with opened(str(tmp_path / "q.db")) as store:
        store.submit(COMMAND)
        watcher = store.watcher()

        def no_descriptor(*args: object) -> socket.socket:
            raise OSError(24, "Too many open files")

        monkeypatch.setattr(sqlite_backend.socket, "socket", no_descriptor)
        try:
            # when a claim commits and its wake-up cannot be sent,
            (claimed,) = store.claim("n1", watcher="w").claims
        finally:
            monkeypatch.undo()
            watcher.close()
        # then the claim is the caller's (not taken for failed), and the log says why.
        assert store.get(claimed.task.id).status is Status.RUNNING
        assert "cannot wake the store's watchers: [Errno 24]" in caplog.text


# -- PostgreSQL connection handling -----------------------------------------------------------


def test_an_unreachable_postgres_names_the_url_and_hides_the_password() -> None:
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1") as raised:
        open_store("postgresql://someone:hunter2@127.0.0.1:1/queue?schema=jobs")

    assert "hunter2" not in str(raised.value)
    assert "schema jobs" in str(raised.value)


def test_the_schema_parameter_is_slotlines_and_the_rest_goes_to_libpq() -> None:
    conninfo, schema = split_url(
        "postgresql://u@db.example:5433/queue?sslmode=require&schema=team_a&options=-c%20x%3Dy"
    )

    assert schema == "team_a"
    assert conninfo == "postgresql://u@db.example:5433/queue?sslmode=require&options=-c%20x%3Dy"
    assert split_url("postgresql://u@h/queue")[1] == "public"


def test_a_malformed_postgres_url_is_refused_before_connecting() -> None:
    with pytest.raises(InvalidInput, match="not a valid PostgreSQL URL"):
        open_store("postgresql://postgres@127.0.0.1:1/test?no_such_option=1")


@pytest.mark.parametrize("schema", ["Jobs", "1jobs", "pg_jobs", "jobs;drop", "a" * 64])
def test_a_schema_name_that_is_not_a_plain_identifier_is_refused(schema: str) -> None:
    with pytest.raises(InvalidInput, match="schema"):
        open_store(f"postgresql://postgres@127.0.0.1:1/test?schema={schema}")


@pytest.mark.postgres
def test_queues_in_different_schemas_of_one_database_are_independent(pg_url: str) -> None:
    with fresh_schema(pg_url) as other_url, opened(pg_url) as one, opened(other_url) as two:
        one.set_setting("max_concurrent", 1)
        task = one.submit(COMMAND)

        assert two.list_tasks() == []
        assert two.settings()["max_concurrent"] == 3
        assert one.get(task.id).status is Status.QUEUED


@pytest.mark.postgres
def test_a_read_under_way_does_not_hold_up_a_write_of_the_same_postgres_store(
    pg_url: str,
) -> None:
    # Given a serve process's store, one thread of which is inside a long read (the
    # dashboard reading a long line),
    with opened(pg_url) as store:
        inside, done = threading.Event(), threading.Event()

        def long_read() -> None:
            with store._transaction(write=False):
                inside.set()
                done.wait(60)

        reader = threading.Thread(target=long_read)
        reader.start()
        try:
            assert inside.wait(30)
            # when another thread (the node) writes, then it goes through meanwhile, on
            # another connection of the store's pool.
            task = store.submit(COMMAND)
            assert store.get(task.id).status is Status.QUEUED
        finally:
            done.set()
            reader.join(30)


@pytest.mark.postgres
def test_postgres_store_and_watcher_reconnect_after_losing_their_connections(
    pg_url: str,
) -> None:
    app = f"slotline_test_{secrets.token_hex(4)}"
    url = f"{pg_url}&application_name={app}"
    with opened(url) as store, opened(pg_url) as writer:
        task = store.submit(COMMAND)
        watcher = store.watcher()

        # When the server drops every connection of this store (restart, failover)…
        with psycopg.connect(split_url(pg_url)[0], autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [app],
            ).fetchall()
        assert len(killed) >= 2  # the watcher's, and the pool's one or more

        # …then the next call opens a new connection,
        assert store.get(task.id).status is Status.QUEUED

        async def scenario() -> None:
            # and the watcher reconnects (reporting a possible missed change), then wakes
            # on the next change again.
            assert await watcher.wait(10) is True
            await asyncio.to_thread(writer.submit, COMMAND)
            assert await watcher.wait(10) is True

        try:
            asyncio.run(scenario())
        finally:
            watcher.close()


def test_a_new_sqlite_store_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "private" / "store.db"
    open_store(path).close()
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_a_failing_query_is_a_store_error_and_changes_nothing(store_url: str) -> None:
    # Given a store whose events table someone renamed away (a damaged database),
    def rename(old: str, new: str) -> None:
        if "://" in store_url:
            conninfo, schema = split_url(store_url)
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute(f'ALTER TABLE "{schema}".{old} RENAME TO {new}')
        else:
            with closing(sqlite3.connect(store_url)) as conn:
                conn.execute(f"ALTER TABLE {old} RENAME TO {new}")

    with opened(store_url) as store:
        task = store.submit(COMMAND)
        rename("events", "events_away")
        # when a verb's query fails, then it raises StoreError (the type every caller
        # retries or reports) chained to the driver's error, and its writes are undone.
        with pytest.raises(StoreError, match="events") as raised:
            store.cancel(task.id)
        assert isinstance(raised.value.__cause__, sqlite3.Error | psycopg.Error)
        rename("events_away", "events")
        assert store.get(task.id).status is Status.QUEUED
        assert store.cancel(task.id).status is Status.CANCELLED
