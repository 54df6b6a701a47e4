"""Function tasks in the store: which names live nodes serve, what a claim takes, and the
results functions return (every backend)."""

from __future__ import annotations

import json

import pytest

from contract.conftest import Clock, SubmitFn
from slotline.errors import InvalidInput, StaleAttempt
from slotline.models import Status
from slotline.store import Store


def function(submit: SubmitFn, name: str, **fields: object) -> str:
    return submit(name, command=[], callable=name, args={"x": 1}, **fields).id


def test_a_queued_function_no_live_node_serves_says_so_until_one_does(
    store: Store, submit: SubmitFn
) -> None:
    task_id = function(submit, "agents.review")
    reason = store.get(task_id).status_reason or ""
    assert reason.startswith("no live node serves function 'agents.review'")
    assert store.status().queued[0].status_reason == reason
    waiting = store.get(task_id).to_dict()["waiting_reason"]
    assert (waiting["kind"], waiting["text"]) == ("unserved", reason)
    store.register_node("n1")
    store.serve_functions("n1", ["agents.review", "agents.other"])
    assert store.served_functions() == {"agents.review", "agents.other"}
    assert store.get(task_id).status_reason is None
    # A node that stops no longer serves anything.
    store.unregister_node("n1")
    assert store.served_functions() == frozenset()
    assert (store.get(task_id).status_reason or "").startswith("no live node serves")


def test_a_node_claims_only_the_functions_it_serves(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    mine = function(submit, "agents.mine")
    theirs = function(submit, "agents.theirs")
    command = submit("a command").id
    claimed = store.claim("n1", now=clock.now, functions=frozenset({"agents.mine"})).claims
    assert {c.task.id for c in claimed} == {mine, command}
    assert store.get(theirs).status is Status.QUEUED


def test_a_result_is_the_tasks_once_its_attempt_succeeded(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    task_id = function(submit, "agents.review", max_attempts=2, backoff=0)
    (first,) = store.claim("n1", now=clock.now).claims
    store.put_result(first.attempt.id, first.attempt.token, json.dumps({"n": 1}))
    # A result is shown only once its attempt has succeeded: this one fails after all.
    assert store.get(task_id).result is None
    store.finish(first.attempt.id, first.attempt.token, 1, "ValueError: no", now=clock.now)
    assert store.get(task_id).result is None
    (second,) = store.claim("n1", now=clock.advance(1)).claims
    with pytest.raises(StaleAttempt):
        store.put_result(first.attempt.id, first.attempt.token, "2")
    with pytest.raises(StaleAttempt):
        store.put_result(second.attempt.id, "wrong token", "2")
    store.put_result(second.attempt.id, second.attempt.token, json.dumps([2, "two"]))
    done = store.finish(second.attempt.id, second.attempt.token, 0, now=clock.now)
    assert done.status is Status.SUCCEEDED
    assert store.get(task_id).result == [2, "two"]
    assert store.get(task_id).to_dict()["result"] == [2, "two"]
    # A restart starts over: the new attempt has no result yet.
    store.restart(task_id)
    assert store.get(task_id).result is None


def test_a_result_is_json_of_bounded_size(store: Store, submit: SubmitFn, clock: Clock) -> None:
    function(submit, "agents.review")
    (claimed,) = store.claim("n1", now=clock.now).claims
    attempt = claimed.attempt
    with pytest.raises(InvalidInput, match="not JSON"):
        store.put_result(attempt.id, attempt.token, "{oops")
    with pytest.raises(InvalidInput, match="at most 1048576 are kept"):
        store.put_result(attempt.id, attempt.token, json.dumps("x" * 1024 * 1024))
