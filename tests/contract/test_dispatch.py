"""Dispatch: queue order and positions, filling free slots, global and per-key limits."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from slotline.errors import InvalidInput, NotFound, StaleAttempt
from slotline.line import STATUS_HEAD
from slotline.models import Status, Task
from slotline.store import Report, StartReport, Store, Watcher
from slotline.store.estimates import ALL
from slotline.store.listing import ETA_WHOLE
from slotline.taskfilter import ListQuery

from .conftest import NODE, ClaimFn, Clock, FinishFn, LineFn, SubmitFn, titles


def test_queue_order_is_priority_then_submission(
    store: Store, submit: SubmitFn, line: LineFn
) -> None:
    submit("low", priority="low")
    submit("normal-1")
    submit("urgent", priority="urgent")
    submit("normal-2", priority="medium")
    submit("high", priority="P1")

    assert line() == ["urgent", "high", "normal-1", "normal-2", "low"]
    queued = store.status().queued
    assert [t.position for t in queued] == [1, 2, 3, 4, 5]
    assert {t.title: t.position for t in store.list_tasks()} == {
        t.title: t.position for t in queued
    }
    assert store.get(queued[2].id).position == 3


def test_positions_close_up_when_the_head_starts(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 1)
    submit("a")
    b = submit("b")

    (started,) = claim()

    assert started.task.title == "a"
    assert started.task.status is Status.RUNNING
    assert store.get(b.id).position == 1
    assert store.get(started.task.id).position is None


def test_claim_fills_every_free_slot_in_one_pass(
    store: Store, submit: SubmitFn, claim: ClaimFn, line: LineFn
) -> None:
    for name in "abcde":
        submit(name)

    started = claim()

    assert titles(started) == ["a", "b", "c"]
    assert all(c.attempt.number == 1 and not c.attempt.over_limit for c in started)
    assert line() == ["d", "e"]
    status = store.status()
    assert (status.active, status.max_concurrent, status.slots_available) == (3, 3, 0)
    assert status.at_capacity
    assert claim() == []


def test_a_finished_attempt_frees_its_slot(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    store.set_setting("max_concurrent", 2)
    for name in "abcd":
        submit(name)
    first, second = claim()

    finish(first, 0)
    finish(second, 1)

    assert titles(claim()) == ["c", "d"]


def test_max_concurrent_can_be_raised_and_lowered(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn
) -> None:
    for name in "abcdef":
        submit(name)
    store.set_setting("max_concurrent", 1)
    (a,) = claim()

    store.set_setting("max_concurrent", 4)
    assert titles(claim()) == ["b", "c", "d"]

    # Lowering the limit stops nothing that runs; new starts wait until under it.
    store.set_setting("max_concurrent", 2)
    finish(a)
    assert claim() == []
    assert store.status().active == 3
    assert store.settings()["max_concurrent"] == 2


def test_zero_max_concurrent_starts_nothing(store: Store, submit: SubmitFn, claim: ClaimFn) -> None:
    store.set_setting("max_concurrent", 0)
    submit("a")

    assert claim() == []


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("agent", lambda v: {"agent": v}),
        ("workspace", lambda v: {"workspace": f"/src/{v}"}),
        ("user", lambda v: {"user": v}),
        ("label:repo", lambda v: {"labels": {"repo": v}}),
    ],
    ids=["agent", "workspace", "user", "label"],
)
class TestPerKeyLimits:
    def value(self, key: str, name: str) -> str:
        return f"/src/{name}" if key == "workspace" else name

    def test_generic_limit_caps_each_value_without_blocking_the_line(
        self, store: Store, submit: SubmitFn, claim: ClaimFn, key: str, field: Any
    ) -> None:
        # Given at most one running task per value, and two tasks of value x in front,
        store.set_limit(key, None, 1)
        submit("x1", **field("x"))
        submit("x2", **field("x"))
        submit("y1", **field("y"))
        submit("none")

        # then the second x waits while the tasks behind it start.
        assert titles(claim()) == ["x1", "y1", "none"]
        assert titles(store.status().queued) == ["x2"]

    def test_a_named_value_beats_the_generic_limit(
        self, store: Store, submit: SubmitFn, claim: ClaimFn, key: str, field: Any
    ) -> None:
        store.set_setting("max_concurrent", 10)
        store.set_limit(key, None, 1)
        store.set_limit(key, self.value(key, "x"), 3)
        store.set_limit(key, self.value(key, "z"), 0)
        for name in ("x1", "x2", "x3", "x4", "y1", "y2", "z1"):
            submit(name, **field(name[0]))

        assert titles(claim()) == ["x1", "x2", "x3", "y1"]

    def test_a_limit_counts_only_running_tasks(
        self,
        store: Store,
        submit: SubmitFn,
        claim: ClaimFn,
        finish: FinishFn,
        key: str,
        field: Any,
    ) -> None:
        store.set_limit(key, self.value(key, "x"), 1)
        submit("x1", **field("x"))
        submit("x2", **field("x"))
        (first,) = claim()

        finish(first, 1)

        assert titles(claim()) == ["x2"]

    def test_removing_a_limit_lets_waiting_tasks_start(
        self, store: Store, submit: SubmitFn, claim: ClaimFn, key: str, field: Any
    ) -> None:
        store.set_limit(key, None, 1)
        submit("x1", **field("x"))
        submit("x2", **field("x"))
        assert titles(claim()) == ["x1"]

        store.set_limit(key, None, None)

        assert titles(claim()) == ["x2"]
        assert store.settings().per_key == ()


def test_per_key_limits_combine_with_the_global_limit(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 2)
    store.set_limit("agent", "claude", 1)
    store.set_limit("workspace", None, 1)
    submit("c1", agent="claude", workspace="/a")
    submit("c2", agent="claude", workspace="/b")
    submit("o1", agent="aider", workspace="/a")
    submit("o2", agent="aider", workspace="/b")
    submit("o3", agent="aider", workspace="/c")

    assert titles(claim()) == ["c1", "o2"]


def test_exempt_agents_run_outside_the_global_pool(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # Given a pool of one slot and a PM agent declared outside it,
    store.set_setting("max_concurrent", 1)
    store.set_exempt_agents(["pm"])
    submit("worker-1", agent="claude")
    submit("worker-2", agent="claude")
    submit("pm-1", agent="pm")
    submit("pm-2", agent="pm")

    # then the PM agents start although the pool is full, and do not count against it.
    assert titles(claim()) == ["worker-1", "pm-1", "pm-2"]
    status = store.status()
    assert status.active == 1
    assert sorted(titles(status.running)) == ["pm-1", "pm-2", "worker-1"]
    assert titles(status.queued) == ["worker-2"]


def test_exempt_agents_still_obey_their_per_key_limit(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 0)
    store.set_exempt_agents(["pm"])
    store.set_limit("agent", "pm", 1)
    submit("pm-1", agent="pm")
    submit("pm-2", agent="pm")

    assert titles(claim()) == ["pm-1"]


def test_an_agent_no_longer_exempt_counts_again(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_setting("max_concurrent", 1)
    store.set_exempt_agents(["pm"])
    submit("pm-1", agent="pm")
    claim()

    store.set_exempt_agents([])
    submit("worker")

    assert claim() == []
    assert store.status().active == 1


def test_pause_stops_starts_and_resume_fills_the_slots(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    submit("a")
    submit("b")

    store.pause()
    assert claim() == []
    assert store.status().paused

    store.resume()
    assert not store.status().paused
    assert titles(claim()) == ["a", "b"]


def test_claim_only_starts_kinds_the_node_runs(store: Store, submit: SubmitFn) -> None:
    external = store.submit({"kind": "external", "title": "ext"})
    submit("cmd")

    assert titles(store.claim("n", kinds=frozenset({"external"})).claims) == ["ext"]
    assert store.get(external.id).status is Status.RUNNING
    assert titles(store.claim("n").claims) == ["cmd"]


@pytest.mark.parametrize(
    ("key", "value", "max_running"),
    [
        ("colour", None, 1),
        ("label:", None, 1),
        ("agent", "", 1),
        ("agent", None, -1),
    ],
)
def test_set_limit_validates_its_arguments(
    store: Store, key: str, value: str | None, max_running: int
) -> None:
    with pytest.raises(InvalidInput):
        store.set_limit(key, value, max_running)

    assert store.settings().per_key == ()


@pytest.mark.parametrize("value", [-1, "many", 2.5, True, None, [3]])
def test_max_concurrent_must_be_a_whole_number_of_zero_or_more(store: Store, value: object) -> None:
    with pytest.raises(InvalidInput, match="max_concurrent"):
        store.set_setting("max_concurrent", value)

    assert store.settings()["max_concurrent"] == 3


def test_unknown_setting_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInput, match="unknown setting"):
        store.set_setting("max_concurency", 4)


def test_set_setting_accepts_a_numeric_string(store: Store) -> None:
    store.set_setting("max_concurrent", "5")

    assert store.settings()["max_concurrent"] == 5
    assert store.status().max_concurrent == 5


def test_aging_raises_a_long_waiting_task_one_level_per_interval(store: Store) -> None:
    # Given a low task submitted at 0 and a normal one at 100,
    store.set_setting("max_concurrent", 1)
    old = store.submit({"command": ["old"], "priority": "low"}, now=0)
    new = store.submit({"command": ["new"], "priority": "normal"}, now=100)
    # without aging, priority decides;
    assert [t.id for t in store.status(now=100).queued] == [new.id, old.id]
    # with aging every 60 s, the low one has risen to normal by 100 and, older, goes first,
    store.set_setting("aging_interval", 60)
    assert [t.id for t in store.status(now=100).queued] == [old.id, new.id]
    assert [t.id for t in store.status(now=59).queued] == [new.id, old.id]
    # and dispatch follows the same order.
    (claim,) = store.claim("n", now=100).claims
    assert claim.task.id == old.id


# -- what a claim records and returns (pinned by mutation testing, see docs/testing.md) ----


def test_a_lowered_limit_for_one_claim_starts_only_that_many(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # The resource guard's adaptive limit: this claim may fill 1 slot of the 3.
    for name in "abc":
        submit(name)
    assert len(store.claim(NODE, now=clock.now, limit=1).claims) == 1
    assert len(store.claim(NODE, now=clock.now, limit=5).claims) == 2  # never above the setting


def test_a_claim_follows_the_guard_verdict_its_node_recorded(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a node whose resource guard recorded an adaptive limit of 1 (of 3),
    store.register_node(NODE)
    for name in "abcd":
        submit(name)
    store.set_pressure(NODE, "cpu 95% > 90%", hold=False, limit=1)
    # its claim, told nothing of it, starts 1; another node's is not held back by it.
    assert len(store.claim(NODE, now=clock.now).claims) == 1
    store.register_node("other")
    assert len(store.claim("other", now=clock.now).claims) == 2
    # Once the guard holds, only a task started now starts on the node.
    store.set_pressure(NODE, "memory 120 MB < 500 MB", hold=True)
    (held,) = (t for t in store.list_page(ListQuery()).tasks if t.title == "d")
    store.bump(held.id)
    claimed = store.claim(NODE, now=clock.now).claims
    assert [c.task.title for c in claimed] == ["d"]


def test_a_claim_records_its_start_its_lease_and_an_event_with_the_attempt(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    task = submit("a")

    result = store.claim(NODE, now=clock.now, lease=30)

    (claim,) = result.claims
    assert result.now == clock.now  # the clock the claim went by, for the node's skew
    assert result.next_wake is None  # nothing to wait for
    assert store.get(task.id).started_at == clock.now
    assert claim.attempt.lease_expires_at == clock.now + 30
    (event,) = [e for e in store.events() if e.kind == "claimed"]
    assert event.task_id == task.id
    assert event.data == {
        "attempt": claim.attempt.id, "number": 1, "node": NODE, "over_limit": False,
        "from": "queued", "to": "running",
    }  # fmt: skip


def test_an_attempt_within_its_lease_is_not_reaped_even_if_its_node_is_silent(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    submit("a")
    (claim,) = store.claim("silent", now=clock.now, lease=30).claims
    a = claim.attempt
    # No heartbeat from its node for a minute, but its lease runs 30 s from the claim:
    with pytest.raises(StaleAttempt, match="alive"):
        store.finish(a.id, a.token, None, "reaped", now=clock.now + 20, reap_after=1)
    reaped = store.finish(a.id, a.token, None, "reaped", now=clock.now + 31, reap_after=1)
    assert reaped.status is Status.FAILED


def test_a_claim_wakes_watchers_when_it_starts_or_expires_something(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    watcher = store.watcher()

    async def woken() -> bool:
        return await watcher.wait(0.5)

    try:
        assert store.claim(NODE, now=clock.now).claims == []
        assert asyncio.run(woken()) is False  # nothing happened: nobody is woken
        submit("a")
        asyncio.run(woken())
        store.claim(NODE, now=clock.now)
        assert asyncio.run(woken()) is True  # it started a task
        store.set_setting("max_concurrent", 1)
        late = submit("b", queue_ttl=10)
        asyncio.run(woken())
        assert store.claim(NODE, now=clock.advance(60)).claims == []
        assert store.get(late.id).status is Status.EXPIRED
        assert asyncio.run(woken()) is True  # it expired one
    finally:
        watcher.close()


def test_a_claim_that_takes_every_slot_wakes_no_node_but_wakes_followers(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a limit of two, three commands in line, a node's watcher and a follower's
    # (a dashboard, `--wait`),
    store.set_setting("max_concurrent", 2)
    _, second, third = (submit(title) for title in "abc")
    node, follower = store.watcher(dispatching=True), store.watcher()

    def woken(watcher: Watcher) -> bool:
        return asyncio.run(watcher.wait(0.5))

    try:
        # when a node with one slot starts one task, another node could start one: both
        # wake;
        assert titles(store.claim(NODE, now=clock.now, slots=1).claims) == ["a"]
        assert woken(node)
        assert woken(follower)
        # when another node starts the second, every slot is taken: the follower wakes,
        # the node does not (its claim would find nothing to start);
        assert titles(store.claim("node-2", now=clock.now).claims) == ["b"]
        assert woken(follower) is True
        assert woken(node) is False
        # a task told to start now starts past the limit: a claim (of a node that runs
        # callables only) that leaves it waiting, with every slot taken, wakes the nodes.
        store.bump(third.id)
        assert woken(node)
        assert woken(follower)
        run = store.get(second.id).attempts[0]
        started = [StartReport(run.id, run.token, pid=None, pid_started=None, log_path=None)]
        callables = frozenset({"callable"})
        result = store.claim("node-2", now=clock.now, kinds=callables, started=started)
        assert result.claims == []
        assert result.recorded == [None]
        assert woken(node) is True
    finally:
        node.close()
        follower.close()


def test_a_full_node_reads_its_kill_requests_and_the_next_queue_ttl_without_claiming(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a node running one task, a cancel asked for it, and a task with a TTL in line,
    store.set_setting("max_concurrent", 1)
    submit("running")
    (running,) = store.claim(NODE, now=clock.now).claims
    store.cancel(running.task.id)
    late = submit("late", queue_ttl=30)

    # when the node reads between claims,
    glance = store.between_claims(NODE)

    # then it learns which run to stop and when to claim again, and nothing changed.
    assert [k.attempt_id for k in glance.kills] == [running.attempt.id]
    assert glance.next_wake == pytest.approx(late.created_at + 30, abs=1e-3)
    assert glance.claims == []
    assert store.get(late.id).status is Status.QUEUED
    assert store.between_claims("another-node").kills == []


def test_a_claim_returns_the_stop_requests_for_its_own_node_only(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a run of this node and one of another, both asked to stop,
    store.set_setting("max_concurrent", 2)
    submit("mine")
    (mine,) = store.claim(NODE, now=clock.now).claims
    submit("theirs")
    (theirs,) = store.claim("other", now=clock.now).claims
    store.cancel(mine.task.id)
    store.cancel(theirs.task.id)

    # each node's claim returns its own run to stop, and only that.
    assert [k.attempt_id for k in store.claim(NODE, now=clock.now).kills] == [mine.attempt.id]
    assert [k.attempt_id for k in store.claim("other", now=clock.now).kills] == [theirs.attempt.id]


def test_a_node_claims_only_the_functions_it_serves_when_a_limit_decides_too(
    store: Store, clock: Clock
) -> None:
    # A per-key limit takes the claim off its common case: the plan decides, and still
    # leaves the functions this node does not serve.
    store.set_limit("agent", "claude", 1)
    store.submit({"title": "other", "callable": "theirs"}, now=clock.now)
    mine = store.submit({"title": "mine", "callable": "mine"}, now=clock.now)

    claimed = store.claim(
        NODE, now=clock.now, kinds=frozenset({"callable"}), functions=frozenset({"mine"})
    ).claims

    assert [c.task.id for c in claimed] == [mine.id]


def test_a_claim_returns_the_task_and_attempt_as_stored(
    store: Store, submit: SubmitFn, tmp_path: Path
) -> None:
    # Given a boosted command and a callable (whose start is recorded with its claim),
    command = submit("command", command=["true"])
    store.boost(command.id)
    store.submit({"title": "function", "callable": "noop"})

    # when a node claims both, giving its log folder,
    result = store.claim(NODE, log_dir=tmp_path)

    # then what the claim returns is what the store now holds.
    assert len(result.claims) == 2
    for claimed in result.claims:
        stored = store.get(claimed.task.id)
        assert replace(claimed.task, attempts=stored.attempts) == stored
        assert stored.attempts == (claimed.attempt,)
    function = next(c for c in result.claims if c.task.title == "function")
    assert function.attempt.log_path == str(tmp_path / function.task.id / "1.log")


def test_a_callables_claim_records_its_start_with_the_attempt(store: Store, tmp_path: Path) -> None:
    function = store.submit({"title": "function", "callable": "noop"})

    (claimed,) = store.claim(NODE, log_dir=tmp_path).claims

    # Its start is the claim's: "started" (no process, so no pid) right after "claimed".
    kinds = [e.kind for e in store.events() if e.task_id == function.id]
    assert kinds[-2:] == ["claimed", "started"]
    (started,) = [e for e in store.events() if e.kind == "started"]
    assert started.task_id == function.id
    assert started.data == {"attempt": claimed.attempt.id, "pid": None}


def test_a_task_claimed_again_after_a_failure_is_returned_as_stored(
    store: Store, submit: SubmitFn, finish: FinishFn, clock: Clock
) -> None:
    # Given a task whose first attempt failed (queued again, saying why, with that
    # attempt's exit), and another one started now,
    task = submit("retried", max_attempts=2, backoff=0)
    (first,) = store.claim(NODE, now=clock.now).claims
    finish(first, exit_code=3)
    failed = store.get(task.id)
    assert failed.status is Status.QUEUED
    assert (failed.exit_code, failed.failure_reason) == (3, "exit code 3")
    assert failed.status_reason == "attempt 2 of 2 after: exit code 3"
    bumped = submit("bumped")
    store.bump(bumped.id)
    assert store.get(bumped.id).start_now

    # when both are claimed,
    clock.advance(1)
    claimed = store.claim(NODE, now=clock.now).claims

    # each task the claim returns is the one stored: nothing of the last run's end, nor
    # the start now, is left.
    assert {c.task.id for c in claimed} == {task.id, bumped.id}
    for again in claimed:
        stored = store.get(again.task.id)
        assert replace(again.task, attempts=stored.attempts) == stored
        assert again.task.exit_code is None
        assert again.task.failure_reason is None
        assert again.task.status_reason is None
        assert not again.task.start_now


def test_a_claim_told_to_hold_starts_only_what_was_started_now(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # A node whose log folder is full claims with `hold`: nothing from the line starts,
    # but a task someone started now does.
    submit("a")
    b = submit("b")
    assert store.claim(NODE, now=clock.now, hold=True).claims == []
    store.bump(b.id)
    claimed = store.claim(NODE, now=clock.now, hold=True).claims
    assert [c.task.title for c in claimed] == ["b"]


def test_outcomes_handed_to_a_claim_commit_each_on_its_own_and_free_their_slots(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    # Given one slot, taken by a task, and a report with a wrong token for it,
    store.set_setting("max_concurrent", 1)
    first = submit("first")
    submit("second")
    (running,) = claim()
    bad = Report(running.attempt.id, "not-the-token", 0)
    good = Report(running.attempt.id, running.attempt.token, 0)

    # when both are handed to one claim,
    result = store.claim(NODE, finished=[bad, good])

    # then the bad one is refused, the good one committed, and its slot refilled.
    refused, committed = result.finished
    assert isinstance(refused, StaleAttempt)
    assert committed is None
    assert store.get(first.id).status is Status.SUCCEEDED
    assert titles(result.claims) == ["second"]


def test_many_outcomes_in_one_claim_each_end_their_own_task_as_a_finish_would(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given three running tasks: one with a task waiting on it, one with retries left,
    # one reported twice, and a report for an attempt that does not exist,
    store.set_setting("max_concurrent", 3)
    parent = submit("parent")
    flaky = submit("flaky", max_attempts=2)
    twice = submit("twice")
    child = submit("child", depends_on=[parent.id])
    by_title = {c.task.title: c.attempt for c in claim()}
    assert set(by_title) == {"parent", "flaky", "twice"}

    def report(title: str, code: int) -> Report:
        return Report(by_title[title].id, by_title[title].token, code)

    # when all are handed to one claim,
    result = store.claim(
        NODE,
        now=clock.now,
        finished=[
            report("parent", 0),
            report("flaky", 1),
            report("twice", 0),
            report("twice", 0),
            Report("0" * 32, "token", 0),
        ],
    )

    # then each ends as its own finish would: the child is queued (and started), the
    # flaky task waits to retry, the second report of `twice` and the unknown one are
    # refused, and the rest stand.
    assert result.finished[:3] == [None, None, None]
    assert isinstance(result.finished[3], StaleAttempt)
    assert isinstance(result.finished[4], NotFound)
    assert store.get(parent.id).status is Status.SUCCEEDED
    assert store.get(twice.id).status is Status.SUCCEEDED
    assert store.get(flaky.id).status is Status.QUEUED
    assert store.get(flaky.id).attempts[0].outcome == "failed"
    assert titles(result.claims) == ["child"]
    assert store.get(child.id).status is Status.RUNNING


def test_a_refused_report_among_others_leaves_each_committed_run_one_end_and_one_time(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given three running tasks,
    store.set_setting("max_concurrent", 3)
    for title in ("a", "b", "c"):
        submit(title)
    claims = claim()
    for started in claims:
        store.record_start(started.attempt.id, started.attempt.token, 4242, None, None)
    seq = store.last_seq()

    # when their three outcomes reach one claim with a refused report among them (so
    # the claim undoes its reports and commits them again, each on its own),
    reports = [Report(c.attempt.id, c.attempt.token, 0) for c in claims]
    reports.insert(1, Report(claims[0].attempt.id, "not-the-token", 0))
    result = store.claim(NODE, now=clock.now, finished=reports)

    # then each run ended once: one event, one sample of its time.
    assert [refusal is None for refusal in result.finished] == [True, False, True, True]
    ended = [e.task_id for e in store.events(since=seq) if e.kind == "succeeded"]
    assert sorted(ended) == sorted(c.task.id for c in claims)
    with store._transaction(write=False) as tx:
        times = {(r["scope"], r["name"]): r for r in tx.rows("run_times_all")}
    assert len(json.loads(times[ALL]["samples"])) == 3


def test_a_claim_made_inside_another_write_is_refused_and_changes_nothing(
    store: Store, submit: SubmitFn
) -> None:
    # Given a task in line and a write open on this thread (verbs made together),
    task = submit("a")

    # when a claim is made inside it, it is refused (a claim's refused report rolls
    # back the claim's whole transaction, which must be its own),
    with pytest.raises(RuntimeError, match="commits on its own"), store._together():
        store.claim(NODE)

    # and the task still waits.
    assert store.get(task.id).status is Status.QUEUED


def test_a_run_started_and_ended_within_one_turn_is_recorded_by_one_claim(
    store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock
) -> None:
    # Given two running commands, one of which started and ended before its node's next
    # claim (its start and its end reach that claim together), the other only started,
    store.set_setting("max_concurrent", 2)
    submit("quick")
    submit("slow")
    quick, slow = claim()
    started = [
        StartReport(quick.attempt.id, quick.attempt.token, 4242, None, None),
        StartReport(slow.attempt.id, slow.attempt.token, 4343, None, None),
    ]
    ended = [Report(quick.attempt.id, quick.attempt.token, 0)]
    seq = store.last_seq()

    # when one claim carries all three, at a time given in whole seconds,
    result = store.claim(NODE, now=int(clock.advance(5)), started=started, finished=ended)

    # then each is recorded: both pids, the quick one's end after its start.
    assert result.recorded == [None, None]
    assert result.finished == [None]
    assert store.get(quick.task.id).status is Status.SUCCEEDED
    assert store.get(quick.task.id).attempts[0].pid == 4242
    assert store.get(slow.task.id).attempts[0].pid == 4343
    kinds = [(e.kind, e.task_id) for e in store.events(since=seq)]
    assert kinds.index(("started", quick.task.id)) < kinds.index(("succeeded", quick.task.id))


def test_status_of_the_head_shows_the_first_tasks_and_counts_the_whole_line(
    store: Store, submit: SubmitFn
) -> None:
    # Given a line of five, one of them urgent,
    for title in ("a", "b", "c", "d"):
        submit(title)
    submit("urgent", priority="urgent")

    # when the status of its first two is read,
    head = store.status(limit=2)

    # then they are the first two of the whole line, with their positions, and the
    # total counts all five.
    whole = store.status()
    assert titles(head.queued) == titles(whole.queued)[:2] == ["urgent", "a"]
    assert [t.position for t in head.queued] == [1, 2]
    assert (head.queued_total, whole.queued_total) == (5, 5)
    assert head.to_dict()["next_up"] == whole.to_dict()["next_up"]
    assert all(t.eta_start is not None for t in head.queued)


def test_status_reads_the_head_unless_asked_for_the_whole_line(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given more tasks in line than a status shows by default, one of them urgent,
    names = [f"t{i}" for i in range(STATUS_HEAD + 3)]
    for name in names:
        submit(name)
        clock.advance(1)
    submit("urgent", priority="urgent")

    # when the status is read as it is by default, and with `all`,
    head = store.status()
    whole = store.status(all=True)

    # then the default holds the first STATUS_HEAD in line and counts them all,
    assert titles(head.queued) == ["urgent", *names[: STATUS_HEAD - 1]]
    assert [t.position for t in head.queued] == list(range(1, STATUS_HEAD + 1))
    assert head.queued_total == head.to_dict()["queued_total"] == len(names) + 1
    # and `all` holds every one, in the same order.
    assert titles(whole.queued) == ["urgent", *names]
    assert whole.queued_total == len(names) + 1
    assert head.to_dict()["next_up"] == whole.to_dict()["next_up"]
    # The oldest of the line is read without it: of every task, or of one owner's.
    assert store.oldest_queued_at() == min(t.queued_at or 0 for t in whole.queued)
    assert store.oldest_queued_at(owner="nobody") is None


def test_mine_reads_a_callers_tasks_with_their_places_in_the_whole_line(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a task and its two subtasks among others in line, one of them ann's,
    def later(title: str, **fields: Any) -> Task:
        clock.advance(1)  # oldest first: each submitted after the one before
        return submit(title, **fields)

    later("before")
    parent = later("pm", expected_duration=60)
    for name in ("x", "y"):
        later(name)
    first = later("a", parent_id=parent.id, expected_duration=30)
    later("z", user="ann")
    second = later("b", parent_id=parent.id, priority="high", expected_duration=30)

    # when the subtree's live tasks are read,
    found = store.mine(parent.id)

    # then they are those three, oldest first, each with its place in the whole line,
    # its estimate and NEXT UP as the whole line has them.
    whole = {t.id: t for t in store.status(all=True).queued}
    assert [t.id for t in found] == [parent.id, first.id, second.id]
    for task in found:
        shown = whole[task.id]
        assert (task.position, task.eta_start, task.next_up) == (
            shown.position,
            shown.eta_start,
            shown.next_up,
        )
    assert found[2].next_up
    assert [t.title for t in store.mine(user="ann")] == ["z"]
    assert store.mine(user="nobody") == []


def test_reads_of_a_long_line_estimate_up_to_what_they_show_as_the_whole_line_does(
    store: Store, submit: SubmitFn, clock: Clock
) -> None:
    # Given a line longer than a read simulates in full, and a task waiting on its first,
    store.set_setting("max_concurrent", 2)
    many = ETA_WHOLE + 50
    tasks = store.submit_many(
        [{"command": ["true"], "title": f"t{i}", "expected_duration": 10} for i in range(many)],
        now=clock.now,
    )
    waiting = submit("after", depends_on=[tasks[0].id], expected_duration=10)
    clock.advance(1)
    whole = {t.id: t for t in store.status(all=True).queued}

    # when a task near the head is read, and the dashboard's first page of the line,
    near = store.get(tasks[4].id)
    page = store.line(offset=0, limit=10)

    # then each has the estimate the whole line gives it, and NEXT UP as the whole line
    # has it; the waiting task, which joins behind the part simulated, gets none there
    # (its own read simulates the whole line: it has one).
    assert (near.position, near.eta_start) == (5, whole[near.id].eta_start)
    assert near.eta_start is not None
    shown = page.status.queued
    assert [t.eta_start for t in shown] == [whole[t.id].eta_start for t in shown]
    assert page.next_up == tasks[0].id == store.status().next_up
    assert [t.id for t in page.parked] == [waiting.id]
    assert page.parked[0].eta_start is None
    assert store.get(waiting.id).eta_start is not None
    # A task far back is estimated through the line up to it.
    far = store.get(tasks[-1].id)
    assert (far.position, far.eta_start) == (many, whole[far.id].eta_start)


def test_only_commands_that_ran_teach_run_times(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    # A command that never got a process (its workspace was missing) and one whose
    # program could not be executed end at once: neither says how long runs take.
    for title in ("no process", "not executable"):
        submit(title, agent="coder")
    never, unexecutable = claim()
    clock.advance(0.01)
    finish(never, exit_code=None, reason="cannot start: workspace does not exist")
    attempt = unexecutable.attempt
    store.record_start(attempt.id, attempt.token, pid=4242)
    finish(unexecutable, exit_code=127)
    waiting = submit("next", agent="coder")
    assert store.get(waiting.id).eta_unavailable == "no run of agent coder has finished yet"
    # One that ran does.
    (ran,) = claim()
    store.record_start(ran.attempt.id, ran.attempt.token, pid=4243)
    clock.advance(30)
    finish(ran, exit_code=1)
    later = submit("later", agent="coder")
    assert "recent runs of agent coder (n=1)" in (store.get(later.id).eta_basis or "")


def test_the_head_names_the_next_up_the_whole_line_names(store: Store) -> None:
    # Given a per-key limit full, 25 of its tasks ahead, and a task of another agent
    # type behind them (the one expected to start first, past the status's head)
    store.set_setting("max_concurrent", 3)
    store.set_limit("agent", "claude", 1)
    spec = {"command": ["true"], "expected_duration": 600}
    store.submit({**spec, "agent": "claude"})
    assert len(store.claim("n").claims) == 1
    for _ in range(25):
        store.submit({**spec, "agent": "claude"})
    codex = store.submit({**spec, "agent": "codex"})
    # then the head says what the whole line says
    whole = store.status(all=True)
    head = store.status()
    assert whole.next_up == codex.id
    assert head.next_up == codex.id
    assert head.to_dict()["next_up"] == codex.id
    assert [t.id for t in whole.queued if t.next_up] == [codex.id]


def test_a_callers_task_near_the_head_keeps_its_eta_beside_one_far_back(store: Store) -> None:
    store.set_setting("max_concurrent", 1)
    spec = {"command": ["true"], "expected_duration": 60}
    near = store.submit({**spec, "user": "alice"})
    store.submit_many([{**spec, "user": "bob"}] * 1100)
    far = store.submit({**spec, "user": "alice"})
    first, last = store.mine(user="alice")
    assert (first.id, last.id) == (near.id, far.id)
    assert first.eta_start is not None
    assert first.eta_start == store.get(near.id).eta_start
