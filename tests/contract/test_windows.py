"""The run times a node's claims measure reach their windows in groups (`store/windows.py`):
none is lost or counted twice, and a line that stops claiming is not left behind."""

from __future__ import annotations

import json

import pytest

from slotline.errors import StoreError
from slotline.store import Claim, ClaimResult, Report, Store, open_store
from slotline.store import claim as claiming
from slotline.store.estimates import ALL, GAP
from slotline.store.windows import FLUSH_EVERY

from .conftest import NODE, Clock, SubmitFn

# A node's claims name its watcher: they leave their run times to a later claim.
WATCHER = "the node's watcher"


def _samples(store: Store, scope: tuple[str, str] = ALL) -> list[float]:
    with store._transaction(write=False) as tx:
        found = {(r["scope"], r["name"]): r for r in tx.rows("run_times_all")}
    return json.loads(found[scope]["samples"]) if scope in found else []


def _ran(store: Store, claims: list[Claim]) -> list[Report]:
    """Reports of `claims` as runs that started, and ended (a run without a process
    teaches no run time)."""
    for c in claims:
        store.record_start(c.attempt.id, c.attempt.token, 4242, None, None)
    return [Report(c.attempt.id, c.attempt.token, 0) for c in claims]


def _one_time_waiting(store: Store, node: Store, submit: SubmitFn, clock: Clock) -> ClaimResult:
    """Three tasks at a limit of one, whose node (claiming through `node`) ended the
    first (1 s, written) and the second (0.5 s, left to a later claim) and started the
    third: the last claim's result."""
    store.set_setting("max_concurrent", 1)
    for n in range(3):
        submit(f"t{n}")
    reports = _ran(node, node.claim(NODE, watcher=WATCHER, now=clock.now).claims)
    result = node.claim(NODE, watcher=WATCHER, now=clock.advance(1), finished=reports)
    reports = _ran(node, result.claims)
    return node.claim(NODE, watcher=WATCHER, now=clock.advance(0.5), finished=reports)


def test_a_drain_writes_its_run_times_in_groups_and_all_of_them(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a line of five at a limit of one, whose runs a node reports in its claims,
    store.set_setting("max_concurrent", 1)
    for n in range(5):
        submit(f"t{n}", agent="coder")
    reports = _ran(store, store.claim(NODE, watcher=WATCHER, now=clock.now).claims)
    clock.advance(2)
    # when the first claim that ends a run writes it (none was written before),
    result = store.claim(NODE, watcher=WATCHER, now=clock.now, finished=reports)
    written = clock.now
    assert _samples(store) == [2.0]
    # the next ones within a second leave theirs to a later claim and say when it is due,
    for seconds in (0.25, 0.5):
        reports = _ran(store, result.claims)
        result = store.claim(NODE, watcher=WATCHER, now=clock.advance(seconds), finished=reports)
        assert _samples(store) == [2.0]
        assert result.next_wake == written + FLUSH_EVERY
    # the first claim a second after the last write writes them all, with their gaps,
    reports = _ran(store, result.claims)
    result = store.claim(NODE, watcher=WATCHER, now=clock.advance(0.5), finished=reports)
    assert _samples(store) == [2.0, 0.25, 0.5, 0.5]
    assert _samples(store, ("agent", "coder")) == [2.0, 0.25, 0.5, 0.5]
    assert _samples(store, GAP) == [0.0, 0.0, 0.0, 0.0]
    # and the claim that starts nothing (the line ran dry) writes at once, wakes for none.
    reports = _ran(store, result.claims)
    result = store.claim(NODE, watcher=WATCHER, now=clock.advance(0.125), finished=reports)
    assert result.claims == []
    assert _samples(store) == [2.0, 0.25, 0.5, 0.5, 0.125]
    assert result.next_wake is None


def test_a_claim_that_fails_to_commit_neither_loses_nor_doubles_a_run_time(
    store: Store, submit: SubmitFn, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three runs, one whose time waits to be written,
    result = _one_time_waiting(store, store, submit, clock)
    assert _samples(store) == [1.0]
    # when the claim that would write it with the next one fails before its commit,
    kills = claiming._kill_requests

    def failing(*args: object) -> object:
        raise StoreError("the disk is full")

    monkeypatch.setattr(claiming, "_kill_requests", failing)
    reports = _ran(store, result.claims)
    with pytest.raises(StoreError):
        store.claim(NODE, watcher=WATCHER, now=clock.advance(1), finished=reports)
    assert _samples(store) == [1.0]
    # then the node's retry of the same reports writes both, once each.
    monkeypatch.setattr(claiming, "_kill_requests", kills)
    result = store.claim(NODE, watcher=WATCHER, now=clock.now, finished=reports)
    assert result.finished == [None]
    assert _samples(store) == [1.0, 0.5, 1.0]


def test_a_store_closed_with_run_times_waiting_writes_them(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a node's own store whose claims left a run time to a later claim,
    other = open_store(store.url)
    try:
        _one_time_waiting(store, other, submit, clock)
        assert _samples(store) == [1.0]
    finally:
        # when the node stops and closes it,
        other.close()
    # then what waited is written.
    assert _samples(store) == [1.0, 0.5]


def test_a_claim_that_is_not_a_nodes_writes_its_run_times_at_once(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given runs ended by claims with no watcher of a node behind them (the external
    # executors' endpoint), each within a second of the last write,
    store.set_setting("max_concurrent", 1)
    for n in range(3):
        submit(f"t{n}")
    reports = _ran(store, store.claim(NODE, now=clock.now).claims)
    for seconds in (1.0, 0.5):
        result = store.claim(NODE, now=clock.advance(seconds), finished=reports)
        reports = _ran(store, result.claims)
        # then each claim writes what it measured, and wakes for none of it.
        assert result.next_wake is None
    assert _samples(store) == [1.0, 0.5]
