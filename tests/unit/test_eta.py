"""The ETA simulation: the line played forward under the dispatch policy's own rules."""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotline.limits import Limit
from slotline.models import Status
from slotline.pacing.rates import RateBook, RateLimit
from slotline.scheduler import durations, eta, lineup
from slotline.scheduler.policy import Limits
from slotline.scheduler.ranks import seq_rank
from slotline.store import Store
from slotline.store.estimates import line_task

NOW = 1_000.0
TEN = durations.RunTimes(
    per_agent={agent: durations.Duration(10.0, 5) for agent in "abc"},
    overall=durations.Duration(10.0, 5),
)


def task(n: int, status: Status = Status.QUEUED, **fields: Any) -> lineup.Entry:
    """Task `t{n}` with rank n; fields as in the store's columns (owner, depends_on…)."""
    row: dict[str, Any] = {
        "id": f"t{n}", "kind": "command", "agent": None, "workspace": None, "owner": None,
        "labels": "{}", "priority": 2, "boosted": False, "start_now": False,
        "rank": seq_rank(n + 1), "status": status.value, "depends_on": "[]", "not_before": None,
        "queued_at": NOW, "started_at": None, "expected_duration": None,
    }  # fmt: skip
    row.update(fields)
    return line_task(row)


def starts(line: lineup.Line, run_times: durations.RunTimes = TEN) -> dict[str, float | None]:
    found = eta.simulate(line, run_times)
    return {tid: None if e.start is None else e.start - NOW for tid, e in found.items()}


def test_global_limit_fills_slots_in_waves() -> None:
    queued = [task(i) for i in range(5)]
    got = starts(lineup.Line(running=[], queued=queued, limits=Limits(max_concurrent=2), now=NOW))
    assert got == {"t0": 0, "t1": 0, "t2": 10, "t3": 10, "t4": 20}


def test_running_tasks_free_their_slots_at_their_estimated_end() -> None:
    # Given one running task started 4 s ago with a 10 s estimate…
    running = [task(0, Status.RUNNING, started_at=NOW - 4)]
    line = lineup.Line(running=running, queued=[task(1)], limits=Limits(max_concurrent=1), now=NOW)
    found = eta.simulate(line, TEN)
    # …it ends in 6 s, and the queued one starts then.
    assert found["t0"].finish == NOW + 6
    assert found["t1"].start == NOW + 6
    assert found["t1"].finish == NOW + 16


def test_an_overdue_run_is_given_a_floor_not_a_past_end() -> None:
    running = [task(0, Status.RUNNING, started_at=NOW - 100)]
    found = eta.simulate(lineup.Line(running=running, queued=[], limits=Limits(), now=NOW), TEN)
    finish = found["t0"].finish
    assert finish is not None
    assert finish > NOW


def test_per_key_limit_skips_without_blocking_the_line() -> None:
    # agent a at most 1: the second a waits, the b behind it starts at once.
    queued = [task(0, agent="a"), task(1, agent="a"), task(2, agent="b")]
    limits = Limits(max_concurrent=3, per_key=(Limit("agent", "a", 1),))
    got = starts(lineup.Line(running=[], queued=queued, limits=limits, now=NOW))
    assert got == {"t0": 0, "t1": 10, "t2": 0}


def test_agents_outside_the_pool_neither_wait_for_nor_take_global_slots() -> None:
    queued = [task(0), task(1, agent="pm"), task(2)]
    limits = Limits(max_concurrent=1, exempt_agents=frozenset({"pm"}))
    got = starts(lineup.Line(running=[], queued=queued, limits=limits, now=NOW))
    assert got == {"t0": 0, "t1": 0, "t2": 10}


def test_durations_come_from_expected_duration_then_agent_then_all() -> None:
    queued = [task(0, expected_duration=3.0), task(1, agent="slow"), task(2, agent="new")]
    run_times = durations.RunTimes(
        per_agent={"slow": durations.Duration(50.0, 8)}, overall=durations.Duration(7.0, 20)
    )
    found = eta.simulate(
        lineup.Line(running=[], queued=queued, limits=Limits(max_concurrent=3), now=NOW), run_times
    )
    assert [found[f"t{i}"].finish for i in range(3)] == [NOW + 3, NOW + 50, None]
    assert found["t0"].basis == "expected_duration"
    assert found["t1"].basis == "recent runs of agent slow (n=8)"
    # An agent type none of whose runs has finished: its start is known (a free slot),
    # its end is not (the runs of other agent types say nothing of its own)…
    assert found["t2"].start == NOW
    assert found["t2"].unavailable == "no run of agent new has finished yet"
    # …and a task of no agent type goes by all tasks' runs.
    mixed = eta.simulate(
        lineup.Line(running=[], queued=[task(0)], limits=Limits(), now=NOW), run_times
    )
    assert mixed["t0"].basis == "recent runs of all tasks (n=20)"
    nothing = eta.simulate(
        lineup.Line(running=[], queued=[task(0)], limits=Limits(), now=NOW), durations.RunTimes()
    )
    assert (nothing["t0"].start, nothing["t0"].finish) == (NOW, None)
    assert nothing["t0"].unavailable == "no run has finished yet"


def test_a_start_after_a_run_of_unknown_length_is_unknown() -> None:
    # Given one slot, a run of an agent type that has never finished a run, and one of
    # known length queued behind it…
    running = [task(0, Status.RUNNING, agent="new", started_at=NOW - 5)]
    queued = [task(1, expected_duration=3.0), task(2, Status.WAITING, depends_on='["t1"]')]
    line = lineup.Line(
        running=running, queued=queued[:1], waiting=queued[1:], limits=Limits(max_concurrent=1),
        now=NOW,
    )  # fmt: skip
    found = eta.simulate(line, durations.RunTimes())
    # …neither its end nor the starts that wait for it are known, and each says why.
    assert (found["t0"].start, found["t0"].finish) == (NOW - 5, None)
    assert found["t0"].unavailable == "no run of agent new has finished yet"
    for later in ("t1", "t2"):
        assert (found[later].start, found[later].finish) == (None, None)
        assert found[later].unavailable == (
            "starts after a run whose length is unknown (no run of agent new has finished yet)"
        )
    # With a slot free, the known task starts at once all the same.
    free = eta.simulate(dataclasses.replace(line, limits=Limits(max_concurrent=2)), TEN)
    assert free["t1"].start == NOW


def test_a_run_past_its_expected_time_is_overdue() -> None:
    running = [
        task(0, Status.RUNNING, started_at=NOW - 11),
        task(1, Status.RUNNING, started_at=NOW - 9),
    ]
    found = eta.simulate(lineup.Line(running=running, queued=[], limits=Limits(), now=NOW), TEN)
    assert (found["t0"].due, found["t1"].due) == (NOW - 1, NOW + 1)


def test_held_tasks_and_their_dependents_have_no_estimate() -> None:
    held = [task(0, Status.HELD)]
    waiting = [task(1, Status.WAITING, depends_on='["t0"]')]
    got = starts(
        lineup.Line(
            running=[], queued=[task(2)], held=held, waiting=waiting, limits=Limits(), now=NOW
        )
    )
    assert got == {"t0": None, "t1": None, "t2": 0}


def test_a_dependent_starts_when_its_dependency_ends_in_the_simulation() -> None:
    queued = [task(0), task(1)]
    waiting = [task(2, Status.WAITING, depends_on='["t0"]')]
    got = starts(
        lineup.Line(
            running=[], queued=queued, waiting=waiting, limits=Limits(max_concurrent=2), now=NOW
        )
    )
    # t0 and t1 start now; when both end at 10 the dependent's slot is free.
    assert got == {"t0": 0, "t1": 0, "t2": 10}


@pytest.mark.timeout(10)
def test_a_task_started_now_while_it_waits_starts_over_the_limit_when_its_dependency_ends() -> None:
    # The state machine found this line spinning the simulation forever (with aging on,
    # the clock stepped from one aging wake to the next): a waiting task bumped with
    # "start now" became ready but was never started, as the plan starts such tasks
    # from their own list only.
    queued = [task(0), task(1)]
    waiting = [task(2, Status.WAITING, depends_on='["t0"]', start_now=True, boosted=True)]
    line = lineup.Line(
        running=[],
        queued=queued,
        waiting=waiting,
        limits=Limits(max_concurrent=1),
        now=NOW,
        aging_interval=300.0,
    )
    # t0 runs first; when it ends at 10, t2 starts at once (ahead of t1), and t1 when
    # t2 ends.
    assert starts(line) == {"t0": 0, "t2": 10, "t1": 20}


def test_boosted_and_start_now_tasks_go_first() -> None:
    queued = [task(0), task(1), task(2, boosted=True), task(3, start_now=True)]
    limits = Limits(max_concurrent=1)
    got = starts(lineup.Line(running=[], queued=eta_order(queued), limits=limits, now=NOW))
    # start-now starts at once over the limit; the boosted one is next when it ends.
    assert got == {"t3": 0, "t2": 10, "t0": 20, "t1": 30}


def test_priority_orders_the_simulated_starts() -> None:
    queued = eta_order([task(0, priority=3), task(1, priority=0)])
    got = starts(lineup.Line(running=[], queued=queued, limits=Limits(max_concurrent=1), now=NOW))
    assert got == {"t1": 0, "t0": 10}


def test_not_before_delays_a_start_until_its_time() -> None:
    queued = [task(0, not_before=NOW + 25), task(1)]
    got = starts(lineup.Line(running=[], queued=queued, limits=Limits(max_concurrent=2), now=NOW))
    assert got == {"t0": 25, "t1": 0}


def test_a_paused_queue_has_no_start_estimates() -> None:
    running = [task(0, Status.RUNNING, started_at=NOW)]
    line = lineup.Line(running=running, queued=[task(1)], limits=Limits(), now=NOW, paused=True)
    found = eta.simulate(line, TEN)
    assert (found["t1"].start, found["t1"].finish) == (None, None)
    assert found["t1"].waiting is not None
    assert found["t1"].waiting.kind == "paused"
    assert found["t0"].finish == NOW + 10  # running tasks still end


def guarded(admission: lineup.Admission | None, queued: int = 4) -> lineup.Line:
    """Two runs of 10 s ending at 6 and 10, `queued` tasks behind them, room for 3."""
    running = [task(0, Status.RUNNING, started_at=NOW - 4), task(1, Status.RUNNING, started_at=NOW)]
    line = [task(i) for i in range(2, 2 + queued)]
    return lineup.Line(
        running=running, queued=line, limits=Limits(max_concurrent=3), now=NOW, admission=admission
    )


def test_a_guard_holding_starts_lets_none_start_until_a_run_ends_then_no_more_than_ran() -> None:
    # Without a guard the third slot is taken at once.
    assert starts(guarded(None)) == {"t0": -4, "t1": 0, "t2": 0, "t3": 6, "t4": 10, "t5": 10}
    # Held: the machine is read as full with the two runs; each end lets one start.
    held = guarded(lineup.Admission(held=True))
    assert starts(held) == {"t0": -4, "t1": 0, "t2": 6, "t3": 10, "t4": 16, "t5": 20}
    basis = eta.simulate(held, TEN)["t2"].basis
    assert basis is not None
    assert basis.endswith("; resource guard holding starts: at most 2 running")


def test_a_guard_holding_starts_with_nothing_running_gives_no_estimate_but_start_now() -> None:
    queued = [task(0, start_now=True), task(1)]
    line = lineup.Line(
        running=[], queued=queued, limits=Limits(), now=NOW, admission=lineup.Admission(held=True)
    )
    # A start-now task starts under a hold (as dispatch does); nothing else can be said.
    assert starts(line) == {"t0": 0, "t1": None}


def test_the_guards_adaptive_limit_caps_the_starts() -> None:
    # Limit 1 of 3: nothing starts until both runs have ended, then one at a time.
    line = guarded(lineup.Admission(limit=1))
    assert starts(line) == {"t0": -4, "t1": 0, "t2": 10, "t3": 20, "t4": 30, "t5": 40}
    assert eta.simulate(line, TEN)["t2"].basis == "recent runs of all tasks (n=5); " + (
        "resource guard limit 1"
    )
    # A limit above max_concurrent changes nothing.
    assert starts(guarded(lineup.Admission(limit=5))) == starts(guarded(None))


def test_estimates_play_the_guards_of_the_live_nodes(store: Store) -> None:
    # Given room for 3 and one task of 10 s in line, and two live nodes…
    store.set_setting("max_concurrent", 3)
    first = store.submit({"command": ["true"], "expected_duration": 10})
    claimed = store.claim("a", limit=3).claims
    assert [c.task.id for c in claimed] == [first.id]
    queued = store.submit({"command": ["true"], "expected_duration": 10})
    store.register_node("a")
    store.register_node("b")

    def basis() -> str | None:
        return store.get(queued.id).eta_basis

    def wait() -> float:
        shown = store.get(queued.id)
        assert shown.eta_start is not None
        return shown.eta_start - store.clock()

    assert basis() == "expected_duration"
    # …one node holding starts does not hold the line: the other one starts it.
    store.set_pressure("a", "CPU at 99%", True)
    assert basis() == "expected_duration"
    # When both hold, the machine is full with the one run: the task waits for its end.
    store.set_pressure("b", "CPU at 99%", True)
    assert basis() == "expected_duration; resource guard holding starts: at most 1 running"
    assert wait() > 5
    # An adaptive limit on one of them: it fills up to its limit.
    store.set_pressure("b", "CPU at 99%", False, limit=2)
    assert basis() == "expected_duration; resource guard limit 2"
    assert wait() < 1
    # Calm again everywhere: nothing held back.
    store.set_pressure("a", None, False)
    store.set_pressure("b", None, False)
    assert basis() == "expected_duration"


def test_the_robust_mean_ignores_outliers() -> None:
    samples = [10.0] * 18 + [1000.0, 0.001]
    assert durations.robust_mean(samples) == 10.0
    assert durations.fit(samples).mean == pytest.approx(10.0)


def test_ten_thousand_queued_in_one_pass() -> None:
    limits = Limits(max_concurrent=4, per_key=(Limit("agent", "a", 1), Limit("agent", "b", 2)))
    queued = [task(i, agent="abc"[i % 3]) for i in range(10_000)]
    found = eta.simulate(lineup.Line(running=[], queued=queued, limits=limits, now=NOW), TEN)
    assert all(found[t.id].start is not None for t in queued)


def eta_order(tasks: list[lineup.Entry]) -> list[lineup.Entry]:
    from slotline.scheduler.policy import order

    return order(tasks, NOW)


def test_the_dispatch_gap_delays_each_refill_of_a_slot() -> None:
    queued = [task(i) for i in range(3)]
    gap = durations.RunTimes(overall=durations.Duration(10.0, 5), gap=1.0)
    got = starts(
        lineup.Line(running=[], queued=queued, limits=Limits(max_concurrent=1), now=NOW), gap
    )
    assert got == {"t0": 0, "t1": 11, "t2": 22}


def log_normal(median: float, sigma: float, n: int = 50) -> list[float]:
    """`n` run times spread as a log-normal: its quantiles, so without randomness."""
    normal = statistics.NormalDist()
    return [median * math.exp(sigma * normal.inv_cdf((i + 0.5) / n)) for i in range(n)]


@pytest.mark.parametrize("sigma", [0.35, 0.6, 1.0])
def test_the_expected_run_time_is_the_mean_of_a_log_normal_not_its_middle(sigma: float) -> None:
    # Sums of run times (the wait behind them) grow by the mean, which for a skewed
    # distribution is well above its median and above a trimmed mean.
    fitted = durations.fit(log_normal(10.0, sigma))
    assert fitted.mean == pytest.approx(10.0 * math.exp(sigma**2 / 2), rel=0.03)
    assert fitted.sigma == pytest.approx(sigma, rel=0.05)


def test_a_few_outliers_do_not_move_the_fit() -> None:
    samples = log_normal(10.0, 0.5)
    outliers = [*samples[:-3], 5_000.0, 9_000.0, 0.0]
    assert durations.fit(outliers).mean == pytest.approx(durations.fit(samples).mean, rel=0.1)


def test_an_overdue_run_is_expected_to_need_more_the_longer_it_has_run() -> None:
    # Given runs of mean 10 s that spread widely, and one that has run 15 s already…
    spread = durations.RunTimes(per_agent={"a": durations.Duration(10.0, 50, sigma=0.8)})
    running = [task(0, Status.RUNNING, agent="a", started_at=NOW - 15)]
    line = lineup.Line(running=running, queued=[task(1, agent="a")], limits=Limits(1), now=NOW)
    found = eta.simulate(line, spread)
    # …it is likely one of the long ones: more than a few seconds are left, and the task
    # behind it starts then.
    assert found["t0"].finish is not None
    assert found["t0"].finish - NOW > 8
    assert found["t1"].start == found["t0"].finish
    later = durations.Duration(10.0, 50, sigma=0.8)
    assert later.remaining(30) > later.remaining(15) > later.remaining(0) - 15
    assert later.remaining(0) == 10.0


def test_work_expected_to_arrive_ahead_delays_the_tasks_it_would_overtake() -> None:
    # Given one slot, three normal tasks of 10 s, and high-priority work seen arriving at
    # one task per 20 s…
    queued = [task(i) for i in range(3)]
    ahead = [lineup.Arrival(agent=None, priority=1, rate=0.05)]
    line = lineup.Line(
        running=[], queued=queued, limits=Limits(1), now=NOW, arrivals=ahead, forecast=300
    )
    # …one arrives at 10 and one at 30, and each takes the slot before the next normal.
    assert starts(line) == {"t0": 0, "t1": 20, "t2": 40}
    found = eta.simulate(line, TEN)
    assert found["t2"].basis == "recent runs of all tasks (n=5); after 2 expected arrivals ahead"
    # Work at the same priority queues behind them, and no forecast, nothing moves.
    same = [lineup.Arrival(agent=None, priority=2, rate=0.05)]
    plain = {"t0": 0, "t1": 10, "t2": 20}
    assert starts(dataclasses.replace(line, arrivals=same)) == plain
    assert starts(dataclasses.replace(line, forecast=0)) == plain


def test_forecast_work_arrives_in_its_agent_types_class_only() -> None:
    # Arrivals of agent b, limited apart, do not delay agent a's line.
    limits = Limits(max_concurrent=2, per_key=(Limit("agent", None, 1),))
    queued = [task(0, agent="a"), task(1, agent="a")]
    ahead = [lineup.Arrival(agent="b", priority=0, rate=0.05)]
    line = lineup.Line(
        running=[], queued=queued, limits=limits, now=NOW, arrivals=ahead, forecast=300
    )
    assert starts(line) == {"t0": 0, "t1": 10}


def test_recent_high_priority_submits_push_a_normal_tasks_estimate_later(store: Store) -> None:
    # Given one slot and tasks of 10 s: six high-priority ones submitted just now…
    store.set_setting("max_concurrent", 1)
    for _ in range(6):
        store.submit({"command": ["true"], "priority": "high", "expected_duration": 10})
    normal = store.submit({"command": ["true"], "expected_duration": 10})
    shown = store.get(normal.id)
    assert shown.eta_start is not None
    assert shown.queued_at is not None
    # …more are expected while they run, so the normal one starts later than the 60 s
    # of work already ahead of it.
    assert shown.eta_start - shown.queued_at > 60 + 1


def test_without_work_jumping_ahead_the_estimate_is_the_line_ahead(store: Store) -> None:
    store.set_setting("max_concurrent", 1)
    for _ in range(6):
        store.submit({"command": ["true"], "expected_duration": 10})
    normal = store.submit({"command": ["true"], "expected_duration": 10})
    shown = store.get(normal.id)
    assert shown.eta_start is not None
    assert shown.queued_at is not None
    assert shown.eta_start - shown.queued_at == pytest.approx(60, abs=1)


def test_the_dispatch_gap_counts_every_slot_a_claim_refilled(store: Store) -> None:
    # Given two slots running, and tasks of 10 s behind them…
    store.set_setting("max_concurrent", 2)
    ids = [store.submit({"command": ["true"], "expected_duration": 10}).id for _ in range(8)]
    at = time.time() + 1_000
    first = store.claim("node", now=at).claims
    # …the two runs end 0.2 s apart, and one claim refills both slots 0.3 s after the
    # first end: the slots stood empty 0.3 s and 0.1 s, 0.2 s on average.
    store.finish(first[0].attempt.id, first[0].attempt.token, 0, now=at + 5.0)
    store.finish(first[1].attempt.id, first[1].attempt.token, 0, now=at + 5.2)
    assert len(store.claim("node", now=at + 5.3).claims) == 2
    starts = [store.get(task_id).eta_start for task_id in ids[4:]]
    assert None not in starts
    # Then each run in line is followed by that gap before the next one starts.
    assert starts[0] == pytest.approx(at + 5.3 + 10 + 0.2, abs=1e-6)
    assert starts[2] == pytest.approx(at + 5.3 + 2 * (10 + 0.2), abs=1e-6)


def test_tasks_moved_up_are_not_forecast_as_new_work(store: Store) -> None:
    # Given one slot, six tasks of 10 s, three of them raised to urgent and one started
    # now: they were already in line, so the last one still has 60 s of work ahead…
    store.set_setting("max_concurrent", 1)
    ids = [store.submit({"command": ["true"], "expected_duration": 10}).id for _ in range(6)]
    for task_id in ids[:3]:
        store.set_priority(task_id, "urgent")
    store.boost(ids[3])
    last = store.submit({"command": ["true"], "expected_duration": 10})
    shown = store.get(last.id)
    assert shown.eta_start is not None
    assert shown.queued_at is not None
    # …and no more moves are expected to add to it.
    assert shown.eta_start - shown.queued_at == pytest.approx(60, abs=1)
    assert shown.eta_basis == "expected_duration"


@pytest.mark.parametrize("aside", ["forecast", "guard"])
def test_the_head_of_a_long_line_gets_the_estimates_the_whole_line_gives_it(
    store: Store, aside: str
) -> None:
    # Given one slot, six high-priority tasks just submitted (so more are expected), a
    # run under way, and normal ones behind…
    store.set_setting("max_concurrent", 2)
    for _ in range(6):
        store.submit({"command": ["true"], "priority": "high", "expected_duration": 10})
    store.claim("a", limit=1)
    for _ in range(6):
        store.submit({"command": ["true"], "expected_duration": 10})
    if aside == "guard":
        store.register_node("a")
        store.set_pressure("a", "CPU at 99%", True)
    # …the head read alone (`status --limit`) is estimated as in the whole line.
    head = store.status(limit=8)
    assert head.queued_total == 11
    whole = {t.id: (t.eta_start, t.eta_basis) for t in store.status().queued}
    shown = {t.id: (t.eta_start, t.eta_basis) for t in head.queued}
    assert shown == {task_id: whole[task_id] for task_id in shown}
    bases = [basis or "" for _start, basis in shown.values()]
    expect = "expected arrivals ahead" if aside == "forecast" else "resource guard"
    assert any(expect in basis for basis in bases)


def test_etas_respect_a_rate_and_a_back_off_hold() -> None:
    # Given: 2 starts per 30 s of claude (one start 10 s ago), aider held 25 s more
    book = RateBook([RateLimit("agent", "claude", 2, 30.0)], {("agent", "claude"): [NOW - 10]})
    queued = [task(i, agent="claude") for i in range(4)] + [task(9, agent="aider")]
    line = lineup.Line(
        running=[], queued=queued, limits=Limits(max_concurrent=10), now=NOW,
        rates=book, holds={"aider": NOW + 25},
    )  # fmt: skip

    got = starts(line)

    # Then: one now, one when the old start leaves the window, then two per window
    assert got == {"t0": 0, "t1": 20, "t2": 30, "t3": 50, "t9": 25}
    assert book.starts == {("agent", "claude"): [NOW - 10]}  # the line's book is untouched


def test_etas_follow_the_fair_order() -> None:
    queued = [task(0, owner="a"), task(1, owner="a"), task(2, owner="b")]
    fair = {"t0": 0.0, "t1": 1.0, "t2": 0.0}
    line = lineup.Line(
        running=[], queued=queued, limits=Limits(max_concurrent=1), now=NOW, fair=fair
    )

    assert starts(line) == {"t0": 0, "t2": 10, "t1": 20}


def test_a_start_that_does_not_wait_for_a_run_of_unknown_length_stays_known() -> None:
    # Given a run of unknown length and two free slots, a task delayed by an hour starts
    # then whatever that run does: its start is known.
    running = [task(0, Status.RUNNING, agent="new", started_at=NOW)]
    queued = [task(1, expected_duration=3.0, not_before=NOW + 3600)]
    line = lineup.Line(running=running, queued=queued, limits=Limits(max_concurrent=3), now=NOW)
    found = eta.simulate(line, durations.RunTimes())
    assert (found["t1"].start, found["t1"].finish) == (NOW + 3600, NOW + 3603)


@st.composite
def _pool_lines(draw: st.DrawFn) -> tuple[lineup.Line, durations.RunTimes]:
    """Random lines under the pool's limit alone (priorities, boosts, start-now tasks,
    start times, agent types with and without run times, expected durations, running,
    waiting and held tasks, aging, an adaptive limit), and run times for them."""
    n = draw(st.integers(0, 24))
    statuses = draw(
        st.lists(
            st.sampled_from([Status.QUEUED] * 4 + [Status.RUNNING, Status.WAITING, Status.HELD]),
            min_size=n,
            max_size=n,
        )
    )
    tasks = []
    for i, status in enumerate(statuses):
        fields: dict[str, Any] = {
            "agent": draw(st.sampled_from([None, "a", "b", "z"])),
            "priority": draw(st.integers(0, 4)),
            "boosted": draw(st.booleans()),
            "start_now": status is not Status.RUNNING and draw(st.integers(0, 9)) == 0,
            "expected_duration": draw(st.sampled_from([None, None, 3.0, 25.0])),
            "queued_at": NOW - draw(st.integers(0, 600)),
        }
        if status is Status.QUEUED and draw(st.integers(0, 4)) == 0:
            fields["not_before"] = NOW + draw(st.integers(1, 40))
        if status is Status.RUNNING:
            fields["started_at"] = NOW - draw(st.integers(0, 30))
        if status is Status.WAITING and i:
            fields["depends_on"] = f'["t{draw(st.integers(0, i - 1))}"]'
        tasks.append(task(i, status, **fields))
    of = {s: [t for t in tasks if t.status is s] for s in Status}
    limits = Limits(max_concurrent=draw(st.integers(1, 5)))
    line = lineup.Line(
        running=of[Status.RUNNING],
        queued=eta_order(of[Status.QUEUED]),
        waiting=of[Status.WAITING],
        held=of[Status.HELD],
        limits=limits,
        now=NOW,
        aging_interval=draw(st.sampled_from([None, 60.0])),
    )
    known = draw(st.sampled_from(["all", "a only", "none"]))
    per_agent = {"a": durations.Duration(8.0, 5)} if known != "none" else {}
    overall = durations.Duration(12.0, 5) if known == "all" else None
    return line, durations.RunTimes(per_agent, overall, gap=draw(st.sampled_from([0.0, 0.5])))


@settings(max_examples=300, deadline=None)
@given(_pool_lines())
def test_under_the_pool_alone_the_estimates_are_the_plans(
    drawn: tuple[lineup.Line, durations.RunTimes],
) -> None:
    # Given a line that only the pool's limit decides, and its run times,
    line, run_times = drawn
    assert eta._plain(line, line.limits, None)

    # when it is simulated without asking the plan at each instant, and asking it,
    fast = eta.simulate(line, run_times)
    with mock.patch.object(eta, "_plain", return_value=False):
        asked = eta.simulate(line, run_times)

    # then every task has the same estimate.
    assert fast == asked
