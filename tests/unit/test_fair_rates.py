"""Fairness, rate limits and provider back-off in the policy, alone: properties over
random lines (hypothesis) and long simulated runs."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotline.errors import InvalidInput
from slotline.models import Kind, Priority, Status, Task
from slotline.pacing import backoff
from slotline.pacing.rates import RateBook, RateLimit, parse_period, parse_rate
from slotline.scheduler import policy
from slotline.scheduler.fairness import Fairness, charged, check_fairness
from slotline.scheduler.policy import Limits, Snapshot
from slotline.scheduler.ranks import seq_rank

NOW = 1_000_000.0
USERS = ("alice", "bob", "carol")

BASE = Task(
    id="", kind=Kind.COMMAND, command=("true",), callable=None, args={}, title="t",
    agent=None, workspace=None, user=None, labels={}, env={}, priority=Priority.NORMAL,
    boosted=False, start_now=False, rank="1", status=Status.QUEUED, status_reason=None,
    depends_on=(), parent_id=None, depth=0, max_attempts=1, backoff=1.0, timeout=None,
    queue_ttl=None, not_before=None, kill_request=None, restart_requested=False,
    created_at=NOW - 600, queued_at=NOW, started_at=None, finished_at=None, exit_code=None,
    failure_reason=None, attempt_count=0, attempt_base=0, current_attempt=None,
)  # fmt: skip


def task(n: int, **fields: object) -> Task:
    return dataclasses.replace(BASE, id=f"t{n}", rank=seq_rank(n + 1), **fields)  # type: ignore[arg-type]


def line_of(users: list[str], priorities: list[int] | None = None) -> list[Task]:
    tasks = [
        task(n, user=u, priority=Priority((priorities or [2] * len(users))[n]))
        for n, u in enumerate(users)
    ]
    return sorted(tasks, key=lambda t: (not t.boosted, int(t.priority), t.rank))


# -- fairness ---------------------------------------------------------------------------


def test_each_users_next_task_takes_turns_within_a_priority_level() -> None:
    line = line_of(["alice"] * 4 + ["bob"] * 2 + ["carol"])

    ordered = policy.order(line, NOW, fairness=Fairness("user"))

    assert [t.user for t in ordered] == [
        "alice", "bob", "carol", "alice", "bob", "alice", "alice",
    ]  # fmt: skip


def test_fairness_never_lets_a_lower_priority_pass_and_weights_give_more_turns() -> None:
    line = line_of(["alice"] * 4 + ["bob"] * 4 + ["carol"], [2] * 8 + [1])

    ordered = policy.order(line, NOW, fairness=Fairness("user", {"alice": 2}))

    assert [t.user for t in ordered] == [
        "carol", "alice", "bob", "alice", "alice", "bob", "alice", "bob", "bob",
    ]  # fmt: skip


def test_fairness_never_lets_a_task_pass_a_boosted_one_of_its_priority() -> None:
    boosted = task(0, user="alice", boosted=True)
    line = [boosted, task(1, user="bob"), task(2, user="carol")]

    # alice was served most of late: without the boost her task would go last
    ordered = policy.order(line, NOW, fairness=Fairness("user"), passes={"alice": 9.0})

    assert [t.id for t in ordered] == ["t0", "t1", "t2"]


def test_a_user_served_lately_waits_and_a_newcomer_starts_at_the_floor() -> None:
    line = line_of(["alice", "alice", "bob", "carol"])
    passes = {"alice": 5.0, "bob": 3.0}

    ordered = policy.order(line, NOW, fairness=Fairness("user"), passes=passes)

    # carol (never served) goes just before bob, the least served: no burst of turns
    assert [t.user for t in ordered] == ["carol", "bob", "alice", "alice"]


def test_the_claim_follows_the_fair_order_and_reads_only_the_bands_it_needs() -> None:
    read: list[str] = []
    urgent = line_of(["alice"] * 3 + ["bob"], [0, 0, 0, 0])
    low = [task(100 + n, user="carol", priority=Priority.LOW) for n in range(1000)]

    def lazily() -> object:
        for t in [*urgent, *low]:
            read.append(t.id)
            yield t

    snap = Snapshot(
        running=[], queued=lazily(), limits=Limits(max_concurrent=2), now=NOW,
        fairness=Fairness("user"),
    )  # fmt: skip
    plan = policy.plan(snap)

    assert [s.task.user for s in plan.start] == ["alice", "bob"]
    assert len(read) <= len(urgent) + 1  # the low band was not read beyond its first task


@settings(max_examples=40, deadline=None)
@given(
    backlog=st.lists(st.sampled_from(USERS), min_size=1, max_size=40),
    weights=st.dictionaries(st.sampled_from(USERS), st.integers(1, 4), max_size=3),
    slots=st.integers(1, 3),
)
def test_no_starvation_and_shares_hold_over_a_long_run(
    backlog: list[str], weights: dict[str, int], slots: int
) -> None:
    # Given: an uneven backlog, and every user keeps at least a few tasks waiting
    fairness = Fairness("user", {u: float(w) for u, w in weights.items()})
    queue = line_of([*backlog, *USERS])
    next_n = len(queue)
    running: list[Task] = []
    passes: dict[str, float] = {}
    order: list[str] = []
    # When: 300 turns, the oldest run ending at each, new work always arriving
    for _turn in range(300):
        plan = policy.plan(
            Snapshot(running=running, queued=queue, limits=Limits(max_concurrent=slots),
                     now=NOW, fairness=fairness, passes=passes)
        )  # fmt: skip
        passes.update(charged(passes, fairness, [(s.task, s.turn) for s in plan.start]))
        for start in plan.start:
            order.append(start.task.user or "")
            running.append(start.task)
            queue.remove(start.task)
        if running:
            running.pop(0)
        for user in USERS:
            if sum(1 for t in queue if t.user == user) < 3:
                queue.append(task(next_n, user=user))
                next_n += 1
    # Then: each user's share of the starts is its weight's share, within a task or two,
    # and no user waits more than about one round between two of its starts.
    weight_sum = sum(fairness.weight(u) for u in USERS)
    for user in USERS:
        share = fairness.weight(user) / weight_sum
        assert abs(order.count(user) - len(order) * share) <= 2, (user, order)
        at = [-1, *(i for i, u in enumerate(order) if u == user)]
        gaps = [b - a for a, b in itertools.pairwise(at)]
        assert max(gaps) <= weight_sum / fairness.weight(user) + 2, (user, order)


def test_bad_fairness_is_refused() -> None:
    with pytest.raises(InvalidInput, match="unknown fairness key"):
        check_fairness("colour")
    with pytest.raises(InvalidInput, match="more than 0"):
        check_fairness("user", {"alice": 0})


# -- rate limits -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("20/1m", (20, 60.0)), ("5/30s", (5, 30.0)), ("1000/1d", (1000, 86400.0)), ("3/m", (3, 60.0))],
)
def test_rates_are_read_as_n_per_period(text: str, expected: tuple[int, float]) -> None:
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text", ["20/0s", "20", "0/1m", "x/1m", "20/1w"])
def test_bad_rates_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_rate(text)


def test_a_period_of_zero_is_refused() -> None:
    with pytest.raises(InvalidInput, match="more than 0"):
        parse_period("0m")


@settings(max_examples=80, deadline=None)
@given(
    max_starts=st.integers(1, 5),
    period=st.sampled_from([10.0, 60.0]),
    gaps=st.lists(st.floats(0.1, 30.0), min_size=1, max_size=60),
)
def test_a_rate_is_never_exceeded_in_any_window(
    max_starts: int, period: float, gaps: list[float]
) -> None:
    book = RateBook([RateLimit("agent", "claude", max_starts, period)])
    queue = [task(n, agent="claude") for n in range(100)]
    starts: list[float] = []
    now = NOW
    for gap in gaps:
        plan = policy.plan(
            Snapshot(running=[], queued=queue, limits=Limits(max_concurrent=100), now=now,
                     rates=book)
        )  # fmt: skip
        for start in plan.start:
            book.record(start.task, now)
            starts.append(now)
            queue.remove(start.task)
        if plan.next_wake is not None:
            assert plan.next_wake > now
        now += gap
    for i, at in enumerate(starts):
        in_window = [s for s in starts[i:] if s < at + period]
        assert len(in_window) <= max_starts


def test_a_rate_blocked_key_does_not_block_others_and_says_when_to_wake() -> None:
    book = RateBook([RateLimit("agent", "claude", 1, 60.0)], {("agent", "claude"): [NOW - 10]})
    queue = [task(1, agent="claude"), task(2, agent="aider")]

    plan = policy.plan(Snapshot(running=[], queued=queue, limits=Limits(), now=NOW, rates=book))

    assert [s.task.id for s in plan.start] == ["t2"]
    assert plan.next_wake == NOW + 50
    assert book.starts == {("agent", "claude"): [NOW - 10]}  # the snapshot is unchanged


# -- provider back-off ------------------------------------------------------------------


def test_back_off_halves_the_cap_per_step_and_recovers_one_step_per_success() -> None:
    rule = backoff.BackoffRule(exit_codes=(75,), delay=10, max_delay=40, recover_after=2)
    first = backoff.on_throttled(rule, None, "claude", 8, NOW - 1, NOW, 1.0, "429")
    second = backoff.on_throttled(rule, first, "claude", 8, NOW + 1, NOW + 2, 1.0, "429")
    in_flight = backoff.on_throttled(rule, second, "claude", 8, NOW - 5, NOW + 3, 1.0, "429")

    assert (first.level, first.cap, first.not_before) == (1, 4, NOW + 10)
    assert (second.level, second.cap, second.not_before) == (2, 2, NOW + 2 + 20)
    assert in_flight == second  # a run already in flight does not step down again
    one = backoff.on_success(rule, second, 8, NOW + 30)
    assert one is not None
    assert (one.level, one.successes) == (2, 1)
    up = backoff.on_success(rule, one, 8, NOW + 31)
    assert up is not None
    assert (up.level, up.cap) == (1, 4)
    assert (
        backoff.on_success(rule, backoff.on_success(rule, up, 8, NOW + 32) or up, 8, NOW + 33)
        is None
    )


def test_a_throttled_agent_type_is_held_and_capped_in_the_plan() -> None:
    throttle = backoff.Throttle("claude", 1, 1, NOW + 30, 0, NOW)
    limits = backoff.limits_under(Limits(max_concurrent=4), [throttle])
    queue = [task(1, agent="claude"), task(2, agent="claude"), task(3, agent="aider")]

    held = policy.plan(
        Snapshot(running=[], queued=queue, limits=limits, now=NOW,
                 holds=backoff.holds([throttle]))
    )  # fmt: skip
    later = policy.plan(
        Snapshot(running=[], queued=queue, limits=limits, now=NOW + 30,
                 holds=backoff.holds([throttle]))
    )  # fmt: skip

    assert [s.task.id for s in held.start] == ["t3"]
    assert held.next_wake == NOW + 30
    assert [s.task.id for s in later.start] == ["t1", "t3"]


@pytest.mark.timeout(10)
def test_a_pattern_is_matched_in_linear_time_whatever_it_is() -> None:
    # Python's backtracking `re` takes seconds on 24 letters with this pattern, and 4x
    # more per letter; the match runs under the store's write lock.
    rule = backoff.BackoffRule.from_dict({"pattern": r"(\w+\s?)+429"})
    assert not rule.matches(1, "a" * 16_000 + "!")
    assert rule.matches(1, "error: too many requests 429")


def test_a_pattern_re2_does_not_take_is_refused_with_what_to_do() -> None:
    with pytest.raises(InvalidInput, match="backreferences or lookarounds"):
        backoff.BackoffRule.from_dict({"pattern": r"(a)\1"})


def test_a_rule_matches_its_exit_codes_and_its_pattern_only() -> None:
    rule = backoff.BackoffRule.from_dict({"exit_codes": [75], "pattern": r"(?i)rate.?limit"})

    assert rule.matches(75, None)
    assert rule.matches(1, "Error: Rate limit reached")
    assert not rule.matches(1, "KeyError")


def test_a_refusal_names_the_line_that_matched_trimmed_around_the_match() -> None:
    rule = backoff.BackoffRule.from_dict({"exit_codes": [75], "pattern": r"HTTP 429"})
    long_line = "a" * 500 + " HTTP 429 " + "b" * 500

    assert rule.refusal(75, "HTTP 429") == "exit code 75"
    assert rule.refusal(1, "start\n  error: HTTP 429 Too Many  \nend") == (
        "error: HTTP 429 Too Many"
    )
    trimmed = rule.refusal(1, f"HTTP 429 first\n{long_line}\n")
    assert trimmed is not None
    assert "HTTP 429" in trimmed
    assert trimmed.startswith("…")
    assert trimmed.endswith("…")
    assert len(trimmed) <= backoff.REASON_CHARS + 2
    assert rule.refusal(1, "KeyError") is None


# -- how the CLI shows them -------------------------------------------------------------


def test_status_and_top_lines_show_the_rate_and_the_back_off() -> None:
    from slotline.cli.pacing import status_lines
    from slotline.store import QueueStatus

    rate = RateLimit("agent", "claude", 20, 60.0)
    status = QueueStatus(
        active=0, max_concurrent=3, paused=False, over_limit=False, queued=[], running=[],
        rates=[{**rate.to_dict(), "per_value": False, "used": 20, "next_start_at": NOW + 14}],
        backoff=[{**backoff.Throttle("claude", 1, 1, NOW + 23, 0, NOW, "exit code 75").to_dict(),
                  "holding": True}],
    )  # fmt: skip

    shown = [str(line) for line in status_lines(status, NOW)]

    assert shown == [
        "rate agent[claude] 20/1m: 20 used · next start in 14s",
        "BACKING OFF claude: at most 1 running, held in 23s (step 1; exit code 75)",
    ]
