"""The dispatch policy, alone: `policy.plan` against a small reference model.

The model below is written from the rules in docs/architecture.md, not from policy.py:
start-now tasks first (flagged over-limit when they push a count past a cap), then the
line in queue order (boosted, effective priority, rank), starting every task that fits
under every cap and skipping, not waiting on, one that does not. Random snapshots check
that the two agree and that the rules hold; the named examples after them pin behaviours
that mutation testing found no test for.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from slotline.limits import Limit
from slotline.models import Kind, Priority, Status, Task
from slotline.scheduler import policy
from slotline.scheduler.policy import Limits, Snapshot
from slotline.scheduler.ranks import seq_rank

NOW = 1_000_000.0
AGENTS = (None, "claude", "aider", "pm")
WORKSPACES = (None, "w1", "w2")
TEAMS = (None, "a", "b")
KEYS = ("agent", "workspace", "label:team")

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
    """Task `tN` with rank N (so a lower N is earlier in its band)."""
    return dataclasses.replace(BASE, id=f"t{n}", rank=seq_rank(n), **fields)  # type: ignore[arg-type]


def store_order(tasks: Sequence[Task]) -> list[Task]:
    """The order the store reads the line in: boosted, priority, rank (no aging)."""
    return sorted(tasks, key=lambda t: (not t.boosted, int(t.priority), t.rank))


# -- the reference model ---------------------------------------------------------------


def effective(t: Task, now: float, interval: float | None) -> int:
    if not interval or t.queued_at is None:
        return int(t.priority)
    waited = max(0.0, now - t.queued_at)
    levels = 0
    while (levels + 1) * interval <= waited and levels < int(t.priority):
        levels += 1
    return int(t.priority) - levels


class Counts:
    """Running counts against every cap of `limits`."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.pool = 0
        self.per: Counter[tuple[str, str]] = Counter()

    def in_pool(self, t: Task) -> bool:
        return t.agent not in self.limits.exempt_agents

    def caps(self, t: Task) -> list[tuple[tuple[str, str], int]]:
        """(key, value) -> cap for every capped key this task has a value for."""
        found = []
        for key in {limit.key for limit in self.limits.per_key}:
            value = t.key_value(key)
            if value is None:
                continue
            named = [x.max for x in self.limits.per_key if x.key == key and x.value == value]
            generic = [x.max for x in self.limits.per_key if x.key == key and x.value is None]
            if named or generic:
                found.append(((key, value), (named or generic)[0]))
        return found

    def fits(self, t: Task) -> bool:
        if self.in_pool(t) and self.pool >= self.limits.max_concurrent:
            return False
        return all(self.per[kv] < cap for kv, cap in self.caps(t))

    def take(self, t: Task) -> None:
        self.pool += self.in_pool(t)
        for key in {limit.key for limit in self.limits.per_key}:
            value = t.key_value(key)
            if value is not None:
                self.per[key, value] += 1


def reference(snap: Snapshot, runnable: Callable[[Task], bool]) -> list[tuple[str, bool]]:
    counts = Counts(snap.limits)
    for t in snap.running:
        counts.take(t)
    starts: list[tuple[str, bool]] = []
    for t in snap.start_now:
        if runnable(t):
            starts.append((t.id, not counts.fits(t)))
            counts.take(t)
    if snap.paused:
        return starts
    started = {i for i, _ in starts}
    line = sorted(
        snap.queued,
        key=lambda t: (not t.boosted, effective(t, snap.now, snap.aging_interval), t.rank),
    )
    for t in line:
        if t.id in started or not runnable(t) or (t.not_before or 0) > snap.now:
            continue
        if counts.fits(t):
            starts.append((t.id, False))
            counts.take(t)
    return starts


# -- random snapshots ------------------------------------------------------------------


@st.composite
def tasks(draw: st.DrawFn, first: int, size: int) -> list[Task]:
    made = []
    for n in range(first, first + size):
        team = draw(st.sampled_from(TEAMS))
        made.append(
            task(
                n,
                agent=draw(st.sampled_from(AGENTS)),
                workspace=draw(st.sampled_from(WORKSPACES)),
                labels={} if team is None else {"team": team},
                priority=draw(st.sampled_from(list(Priority))),
                boosted=draw(st.booleans()),
                queued_at=NOW - draw(st.sampled_from([0.0, 0.5, 1.0, 59.0, 60.0, 125.0, 400.0])),
                not_before=draw(st.sampled_from([None, None, NOW - 1, NOW, NOW + 5])),
            )
        )
    return made


limits_strategy = st.builds(
    Limits,
    max_concurrent=st.integers(0, 5),
    per_key=st.lists(
        st.builds(
            Limit,
            key=st.sampled_from(KEYS),
            value=st.sampled_from([None, None, "claude", "w1", "a"]),
            max=st.integers(0, 3),
        ),
        max_size=4,
        unique_by=lambda limit: (limit.key, limit.value),  # as the store keeps them
    ).map(tuple),
    exempt_agents=st.sampled_from([frozenset(), frozenset({"pm"})]),
)


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[Snapshot, frozenset[str]]:
    running = [
        dataclasses.replace(t, status=Status.RUNNING)
        for t in draw(tasks(1, draw(st.integers(0, 5))))
    ]
    line = draw(tasks(100, draw(st.integers(0, 12))))
    marked = [t for t in line if draw(st.integers(0, 5)) == 0]
    line = [dataclasses.replace(t, start_now=True) if t in marked else t for t in line]
    unrunnable = frozenset(t.id for t in line if draw(st.integers(0, 7)) == 0)
    snap = Snapshot(
        running=running,
        queued=store_order(line),
        limits=draw(limits_strategy),
        now=NOW,
        start_now=[t for t in store_order(line) if t.start_now],
        paused=draw(st.booleans()) and draw(st.booleans()),
        aging_interval=draw(st.sampled_from([None, None, 1.0, 60.0])),
    )
    return snap, unrunnable


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_plan_agrees_with_the_reference_model_and_keeps_every_rule(
    drawn: tuple[Snapshot, frozenset[str]],
) -> None:
    snap, unrunnable = drawn

    def runnable(t: Task) -> bool:
        return t.id not in unrunnable

    result = policy.plan(snap, runnable)
    starts = [(s.task_id, s.over_limit) for s in result.start]

    # The plan is the model's, start for start, over-limit flags included.
    assert starts == reference(snap, runnable)

    by_id = {t.id: t for t in snap.queued}
    forced = [by_id[i] for i, _ in starts if by_id[i].start_now]
    normal = [by_id[i] for i, _ in starts if not by_id[i].start_now]
    # No cap of any key is pushed past by a normal start: counts only grow, so it is
    # enough that each cap holds at the end, unless the running and start-now tasks
    # alone already filled it.
    before, after = Counts(snap.limits), Counts(snap.limits)
    for t in [*snap.running, *forced]:
        before.take(t)
        after.take(t)
    for t in normal:
        after.take(t)
    if normal:
        assert not snap.paused
    for t in normal:
        for kv, cap in after.caps(t):
            assert after.per[kv] <= max(cap, before.per[kv])
        if after.in_pool(t):
            assert after.pool <= max(snap.limits.max_concurrent, before.pool)
    # No head-of-line blocking: a task left in line could not start even now, at the
    # final counts (which only grew since its turn).
    eligible = [
        t for t in snap.queued
        if runnable(t) and not t.start_now and (t.not_before or 0) <= NOW
    ]  # fmt: skip
    started = {i for i, _ in starts}
    if not snap.paused:
        assert not [t.id for t in eligible if t.id not in started and after.fits(t)]
    # Starts follow the queue order, in which every boosted task comes first.
    line = policy.order(snap.queued, NOW, snap.aging_interval)
    assert [t.id for t in normal] == [t.id for t in line if t in normal]
    boosted = [t.boosted for t in line]
    assert boosted == sorted(boosted, reverse=True)
    # Nothing that cannot run, or must wait for its backoff, starts.
    assert not started & unrunnable
    assert all((t.not_before or 0) <= NOW for t in normal)
    # The plan wakes the node for the earliest backoff still ahead, if it looked at one.
    ahead = [t.not_before for t in snap.queued if (t.not_before or 0) > NOW]
    if result.next_wake is not None:
        assert result.next_wake == min(ahead)


@given(
    priority=st.sampled_from(list(Priority)),
    waited=st.floats(0, 10_000, allow_nan=False),
    interval=st.sampled_from([None, 0.5, 1.0, 60.0, 3600.0]),
)
def test_aging_raises_one_level_per_whole_interval_and_never_past_urgent(
    priority: Priority, waited: float, interval: float | None
) -> None:
    t = task(1, priority=priority, queued_at=NOW - waited)

    level = policy.effective_priority(t, NOW, interval)

    assert level == effective(t, NOW, interval)
    assert Priority.URGENT <= level <= priority
    if interval is None or waited < interval:
        assert level == priority


# -- behaviours mutation testing found unpinned -------------------------------------------


def first_started(line: list[Task], **snap: object) -> list[str]:
    limits = snap.pop("limits", Limits(max_concurrent=1))
    plan = policy.plan(
        Snapshot(running=[], queued=store_order(line), limits=limits, now=NOW, **snap)  # type: ignore[arg-type]
    )
    return [s.task_id for s in plan.start]


def test_a_boosted_task_goes_first_even_when_aging_has_raised_another_to_urgent() -> None:
    # Given a boosted low task, and a normal one waiting long enough to age to urgent,
    boosted = task(2, priority=Priority.LOW, boosted=True)
    aged = task(1, priority=Priority.NORMAL, queued_at=NOW - 600)
    # when one slot is free, then the boosted task takes it.
    assert first_started([aged, boosted], aging_interval=60.0) == ["t2"]


def test_aging_lifts_to_urgent_at_most_and_leaves_urgent_tasks_ahead_of_high_ones() -> None:
    # An urgent task goes before a high one queued earlier, with aging on,
    urgent = task(2, priority=Priority.URGENT)
    high = task(1, priority=Priority.HIGH)
    assert first_started([high, urgent], aging_interval=60.0) == ["t2"]
    # and a low task waiting ten intervals reaches urgent (ahead of an earlier high one).
    old = task(3, priority=Priority.LOW, queued_at=NOW - 600)
    assert first_started([high, old], aging_interval=60.0) == ["t3"]


def test_aging_does_not_raise_a_task_that_waited_less_than_one_interval() -> None:
    # Given two normal tasks, the later one queued half a second before the other,
    earlier = task(1, queued_at=NOW)
    later = task(2, queued_at=NOW - 0.5)
    # when aging is one level a second, then neither was raised: rank decides.
    assert first_started([earlier, later], aging_interval=1.0) == ["t1"]


def test_a_task_without_a_value_for_one_limited_key_is_still_held_by_another() -> None:
    # Given at most 2 per agent and 1 per workspace, with one task running in w1,
    limits = Limits(
        max_concurrent=5,
        per_key=(Limit("agent", None, 2), Limit("workspace", None, 1)),
    )
    running = [task(1, workspace="w1", status=Status.RUNNING)]
    # when a task with no agent, in w1, is next in line, then it does not start
    # (the agent limit does not apply to it; the workspace limit still does),
    line = [task(2, workspace="w1"), task(3, workspace="w2")]
    plan = policy.plan(Snapshot(running=running, queued=line, limits=limits, now=NOW))
    # and the one behind it, in another workspace, does.
    assert [s.task_id for s in plan.start] == ["t3"]


def test_the_pool_is_full_only_when_nothing_in_line_may_go_past_it() -> None:
    # Two running tasks take both slots of a limit of two; an agent type exempt from the
    # limit could still start, and one task does not fill two slots.
    running = [task(1, status=Status.RUNNING), task(2, status=Status.RUNNING, agent="pm")]
    assert policy.pool_full(Limits(max_concurrent=2), running) is True
    assert (
        policy.pool_full(Limits(max_concurrent=2, exempt_agents=frozenset({"x"})), running) is False
    )
    assert policy.pool_full(Limits(max_concurrent=2), running[:1]) is False
    # A running task of an exempt type takes no slot.
    assert (
        policy.pool_full(Limits(max_concurrent=2, exempt_agents=frozenset({"pm"})), running)
        is False
    )


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_asking_why_changes_no_plan_and_gives_every_task_left_in_line_a_reason(
    drawn: tuple[Snapshot, frozenset[str]],
) -> None:
    snap, unrunnable = drawn

    def runnable(t: Task) -> bool:
        return t.id not in unrunnable

    why: dict[str, policy.WaitingReason] = {}
    explained = policy.plan(snap, runnable, why=why)
    # The plan is the one a claim makes (which asks no reasons)…
    assert explained == policy.plan(snap, runnable)
    # …and every runnable task it leaves in line says why, while none it starts does.
    started = {s.task_id for s in explained.start}
    left = {t.id for t in snap.queued if runnable(t) and not t.start_now} - started
    assert set(why) == left
    if snap.paused:
        assert {r.kind for r in why.values()} <= {"paused"}
    for task_id, reason in why.items():
        queued = next(t for t in snap.queued if t.id == task_id)
        if (queued.not_before or 0) > NOW:
            assert (reason.kind, reason.until) in (
                ("start_time", queued.not_before),
                ("paused", None),
            )


def test_a_full_limit_is_named_with_its_count_and_the_pool_with_its_size() -> None:
    running = [dataclasses.replace(task(1, agent="claude"), status=Status.RUNNING)]
    line = [task(2, agent="claude"), task(3, agent="aider"), task(4)]
    limits = Limits(max_concurrent=2, per_key=(Limit("agent", "claude", 1),))
    why: dict[str, policy.WaitingReason] = {}
    policy.plan(Snapshot(running=running, queued=line, limits=limits, now=NOW), why=why)
    assert {i: (r.kind, r.text) for i, r in why.items()} == {
        line[0].id: ("limit", "agent=claude: 1/1 running"),
        line[2].id: ("slots", "all 2 slots are taken"),
    }


def test_no_slots_at_all_says_max_concurrent_is_zero() -> None:
    why: dict[str, policy.WaitingReason] = {}
    line = [task(1)]
    policy.plan(
        Snapshot(running=[], queued=line, limits=Limits(max_concurrent=0), now=NOW), why=why
    )
    assert why[line[0].id].kind == "slots"
    assert why[line[0].id].text.startswith("max_concurrent is 0")


def test_a_pool_of_one_says_its_one_slot_is_taken() -> None:
    running = [dataclasses.replace(task(1), status=Status.RUNNING)]
    line = [task(2)]
    why: dict[str, policy.WaitingReason] = {}
    snapshot = Snapshot(running=running, queued=line, limits=Limits(max_concurrent=1), now=NOW)
    policy.plan(snapshot, why=why)
    assert why[line[0].id].text == "the 1 slot is taken"


def test_a_task_held_by_its_limit_and_a_full_pool_is_told_of_its_limit() -> None:
    # Given a full pool of 2, one of them claude's only place,
    running = [
        dataclasses.replace(task(1, agent="claude"), status=Status.RUNNING),
        dataclasses.replace(task(2), status=Status.RUNNING),
    ]
    line = [task(3, agent="claude"), task(4)]
    limits = Limits(max_concurrent=2, per_key=(Limit("agent", "claude", 1),))
    why: dict[str, policy.WaitingReason] = {}
    policy.plan(Snapshot(running=running, queued=line, limits=limits, now=NOW), why=why)
    # then the claude task is told of its limit (a freed slot would not start it), the
    # other of the pool.
    assert {i: (r.kind, r.text) for i, r in why.items()} == {
        line[0].id: ("limit", "agent=claude: 1/1 running"),
        line[1].id: ("slots", "all 2 slots are taken"),
    }
