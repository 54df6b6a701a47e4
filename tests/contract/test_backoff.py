"""Provider back-off: an agent type whose runs are refused by its provider is slowed
down (lower concurrency, held starts) and recovers step by step as runs succeed."""

from __future__ import annotations

from contextlib import closing

import pytest

from slotline.errors import InvalidInput
from slotline.models import Status
from slotline.store import Claim, Store, open_store

from .conftest import ClaimFn, Clock, SubmitFn, titles

RULE = {"exit_codes": [75], "pattern": r"HTTP 429|rate.?limited", "delay": 10, "max_delay": 100}


def end(store: Store, clock: Clock, claimed: Claim, code: int, output: str | None = None) -> None:
    attempt = claimed.attempt
    store.finish(attempt.id, attempt.token, code, now=clock.now, output=output)


def kinds(store: Store) -> list[str]:
    return [e.kind for e in store.events(0, 10_000) if e.kind.startswith("backoff")]


def test_a_throttled_run_lowers_the_cap_holds_starts_and_recovers_as_runs_succeed(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given: claude backs off on exit code 75; four may run
    store.set_setting("max_concurrent", 4)
    store.set_backoff("claude", RULE)
    for n in range(6):
        submit(f"c{n}", agent="claude")
    first = claim()
    assert len(first) == 4

    # When: one run is refused by the provider
    clock.advance(1)
    end(store, clock, first[0], 75)

    # Then: the task is back in line uncounted, claude's cap is halved and starts wait
    task = store.get(first[0].task.id)
    assert task.status is Status.QUEUED
    assert task.attempts[0].outcome == "throttled"
    (throttle,) = store.status(now=clock.now).backoff
    assert (throttle["agent"], throttle["level"], throttle["cap"]) == ("claude", 1, 2)
    assert clock.now + 5 <= throttle["not_before"] <= clock.now + 15
    assert throttle["holding"] is True
    assert kinds(store) == ["backoff"]
    result = store.claim("node-1", now=clock.now)
    assert result.claims == []
    assert result.next_wake == pytest.approx(throttle["not_before"], abs=1e-3)

    # The hold passes, but three still run: over the lowered cap of two, nothing starts.
    clock.advance(15)
    assert claim() == []
    # Runs that were in flight when the provider refused do not count as recovery.
    end(store, clock, first[1], 0)
    end(store, clock, first[2], 0)
    assert store.status(now=clock.now).backoff[0]["level"] == 1
    (next_one,) = claim()
    assert next_one.task.id == first[0].task.id  # it kept its place at the head

    # A run started after the back-off succeeds: one step up, back to normal.
    end(store, clock, next_one, 0)
    assert store.status(now=clock.now).backoff == []
    assert kinds(store) == ["backoff", "backoff_recovered"]
    assert titles(claim()) == ["c4", "c5"]  # with c3 still running: 3 of 4


def test_the_output_pattern_matches_and_each_step_doubles_the_hold(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 8)
    store.set_backoff("claude", {**RULE, "min_concurrent": 2})
    for n in range(3):
        submit(f"c{n}", agent="claude")
    (a, b, _c) = claim()

    clock.advance(1)
    end(store, clock, a, 1, output="error: HTTP 429 Too Many Requests\n")
    level1 = store.status(now=clock.now).backoff[0]
    clock.advance(20)
    (again,) = claim()  # cap 4, hold passed: the refused task starts again
    assert again.task.id == a.task.id
    end(store, clock, again, 1, output="you are rate limited")
    level2 = store.status(now=clock.now).backoff[0]

    assert (level1["cap"], level2["cap"]) == (4, 2)
    assert level1["not_before"] - (clock.now - 20) <= 15
    assert 10 <= level2["not_before"] - clock.now <= 30
    # An ordinary failure is not the provider's: it fails as usual.
    end(store, clock, b, 1, output="Traceback: KeyError")
    assert store.get(b.task.id).status is Status.FAILED


def test_the_back_off_says_which_line_of_the_output_matched_not_the_exit_code(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given: a run whose output holds the refusal on one long line among others
    store.set_backoff("claude", {"pattern": r'"api_error_status":\s*429'})
    task = submit("c", agent="claude")
    refusal = '{"type":"result","is_error":true,"api_error_status":429,' + '"x":0,' * 100 + "}"
    output = '{"type":"system","subtype":"init"}\n' + refusal + "\nbye\n"

    # When: it ends with exit code 1
    end(store, clock, claim()[0], 1, output=output)

    # Then: the back-off, its event and the task's reason name the matched line,
    # trimmed around the match, not "exit code 1"
    (throttle,) = store.status(now=clock.now).backoff
    assert '"api_error_status":429' in throttle["reason"]
    assert "exit code" not in throttle["reason"]
    assert len(throttle["reason"]) <= 200
    (event,) = [e for e in store.events(0, 10_000) if e.kind == "backoff"]
    assert event.data["reason"] == throttle["reason"]
    assert throttle["reason"] in (store.get(task.id).status_reason or "")
    assert store.get(task.id).attempts[0].reason == throttle["reason"]

    # An exit code that matched says so.
    store.set_backoff("aider", {"exit_codes": [75]})
    submit("a", agent="aider")
    end(store, clock, claim()[0], 75, output="whatever")
    assert store.status(now=clock.now).backoff[0]["reason"] == "exit code 75"


def test_a_task_refused_too_often_fails_and_other_agent_types_are_not_held(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_setting("max_concurrent", 4)
    store.set_backoff("claude", {**RULE, "max_requeues": 1, "delay": 1, "max_delay": 1})
    task = submit("c", agent="claude")
    (first,) = claim()
    end(store, clock, first, 75)
    submit("other", agent="aider")

    assert titles(claim()) == ["other"]
    clock.advance(2)
    (second,) = claim()
    end(store, clock, second, 75)

    assert store.get(task.id).status is Status.FAILED


def test_a_task_refused_once_too_often_fails_with_the_line_that_matched(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given: a task whose one requeue was used by a first refusal
    store.set_backoff("claude", {**RULE, "max_requeues": 1, "delay": 1, "max_delay": 1})
    task = submit("c", agent="claude")
    end(store, clock, claim()[0], 1, output="starting\nHTTP 429 Too Many Requests\n")
    clock.advance(2)

    # When: its next run is refused alike, exiting with 1
    end(store, clock, claim()[0], 1, output="starting\nHTTP 429 Too Many Requests\nbye\n")

    # Then: it fails, saying which line matched, not "exit code 1"
    failed = store.get(task.id)
    assert failed.status is Status.FAILED
    assert failed.failure_reason == "HTTP 429 Too Many Requests"
    assert failed.attempts[-1].reason == "HTTP 429 Too Many Requests"


def test_a_restarted_task_gets_its_requeues_again(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_backoff("claude", {**RULE, "max_requeues": 1, "delay": 1, "max_delay": 1})
    task = submit("c", agent="claude")
    for _ in range(2):  # one requeue, then the run fails
        clock.advance(2)
        (claimed,) = claim()
        end(store, clock, claimed, 75)
    assert store.get(task.id).status is Status.FAILED

    # After a restart the task has its one requeue again: refused once, it goes back
    # in line rather than failing.
    store.restart(task.id)
    clock.advance(2)
    (claimed,) = claim()
    end(store, clock, claimed, 75)
    assert store.get(task.id).status is Status.QUEUED


def test_removing_the_rule_ends_the_back_off(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    store.set_backoff("claude", RULE)
    submit("c", agent="claude")
    end(store, clock, claim()[0], 75)

    store.set_backoff("claude", None)

    assert store.status(now=clock.now).backoff == []
    assert len(claim()) == 1
    assert store.settings()["backoff"] == {}


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ({"pattern": "(unclosed"}, "not a valid regex"),
        ({}, "exit_codes, a pattern"),
        ({"exit_codes": [75], "colour": 1}, "unknown field"),
        ({"exit_codes": [75], "delay": 0}, "delay must be between"),
    ],
)
def test_bad_rules_are_refused(store: Store, rule: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        store.set_backoff("claude", rule)
    assert store.settings()["backoff"] == {}


def test_the_back_off_and_the_turns_outlive_a_restart_and_every_node_sees_them(
    store: Store, store_url: str, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given: claude backing off after a refusal, and fair turns taken
    store.set_setting("max_concurrent", 4)
    store.set_backoff("claude", RULE)
    store.set_fairness("user")
    submit("c", agent="claude", user="alice")
    clock.advance(1)
    end(store, clock, claim()[0], 75)
    before = store.status(now=clock.now).backoff

    # When: another node (or this one restarted) opens the store
    with closing(open_store(store_url)) as other:
        # Then: it holds claude back just the same, and knows alice has had her turn
        assert other.status(now=clock.now).backoff == before
        assert other.claim("node-2", now=clock.now).claims == []
        submit("bob's", user="bob")
        submit("alice's", user="alice")
        assert [t.title for t in other.status(now=clock.now).queued][:2] == ["bob's", "c"]
