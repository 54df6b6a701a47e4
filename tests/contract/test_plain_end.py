"""The claim's plain end (`store/plain_end.py`) held to `runs.end`: on runs (a command,
with or without its process, or a function; with or without an agent type, in back-off
or not; with a dependent; asked to cancel, terminate or restart by force; ended already;
under a key, a child, a parent, on its second attempt, stalled, needing input) and
reports (an exit code, a reason, a requeue, usage, a session, refused tools, a late
report, a wrong token, an id spelled otherwise or not an id, one given twice in a
claim), both leave the store the same within one transaction: the same rows, the same
events (the `drained` one included), the same run time, the same refusal. Every end
that is plain but for one thing, then random mixes; on both stores (on PostgreSQL the
plain end takes its rows from the claim's read-ahead)."""

from __future__ import annotations

import contextlib
import functools
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import fresh_schema
from slotline.errors import SlotlineError
from slotline.models import Usage
from slotline.store import Store, open_store, plain_end, read_ahead, runs
from slotline.store.queries import Tx
from slotline.store.runs import Report

NOW = 1_800_000_000.0
TABLES = ("tasks", "attempts", "deps", "status_counts", "agent_backoff", "task_results")


@dataclass(frozen=True)
class Run:
    function: bool  # a callable, else a command
    agent: str | None
    depended_on: bool  # another task waits on this one
    asked_to_stop: bool  # asked to stop while it runs, by `stop`
    ended: bool  # its end was committed before the report
    spawned: bool  # a command's process was recorded (else it never got one)
    stop: str = "cancel"  # or "terminate", "restart" (forced)
    shape: str = "plain"  # or one of SHAPES: what else the task is or has


STOPS = ("cancel", "terminate", "restart")
# What a task may be beside: under a key; a child of another; the parent of a live one;
# on its second attempt; marked stalled; interactive, marked as needing input (with
# its slot given back or not).
SHAPES = (
    "keyed", "child", "parent", "second attempt", "stalled", "needs input",
    "needs input, slot given back",
)  # fmt: skip


@dataclass(frozen=True)
class Said:
    exit_code: int | None
    reason: str | None
    requeue: bool
    usage: bool
    session: bool
    resumable: bool
    denied: bool
    ended_ago: float | None
    token: str  # "own", "other", "not ascii"
    spelled: str  # the attempt id: "as stored", "upper case", "dashed"


@st.composite
def runs_made(draw: st.DrawFn) -> Run:
    """A run of a function or a command, with or without an agent type, whose end
    would be plain, or would be but for one or two things."""
    function, agent = draw(st.booleans()), draw(st.sampled_from([None, "claude"]))
    run = Run(function, agent, False, False, False, True, draw(st.sampled_from(STOPS)))
    flips = ["depended_on", "asked_to_stop", "ended", "spawned"]
    changed = draw(st.lists(st.sampled_from(flips), max_size=2, unique=True))
    shape = draw(st.sampled_from(("plain", "plain", *SHAPES)))
    if shape.startswith("needs input") and function:
        shape = "plain"  # only an interactive command needs input
    return replace(run, shape=shape, **{name: not getattr(run, name) for name in changed})


run_strategy = runs_made()


# A report that says only that its run succeeded, just now (most reports of a claim).
PLAIN = Said(0, None, False, False, False, False, False, None, "own", "as stored")
# What a report may say otherwise, field by field.
OTHERWISE: dict[str, list[Any]] = {
    "exit_code": [1, 127, None],
    "reason": ["timed out"],
    "requeue": [True],
    "usage": [True],
    "session": [True],
    "resumable": [True],
    "denied": [True],
    "ended_ago": [5.0],
    "token": ["other", "not ascii", "a lone surrogate"],
    "spelled": ["upper case", "dashed", "not an id"],
}


@st.composite
def reports_said(draw: st.DrawFn) -> Said:
    """Plain, or plain but for one or a few things: each condition of the plain end is
    met by all but one field as often as by all."""
    changed = draw(st.lists(st.sampled_from(sorted(OTHERWISE)), max_size=3, unique=True))
    return replace(PLAIN, **{name: draw(st.sampled_from(OTHERWISE[name])) for name in changed})


said_strategy = reports_said()


def _report(attempt_id: str, token: str, said: Said) -> Report:
    spelled = {
        "as stored": attempt_id,
        "upper case": attempt_id.upper(),
        "dashed": str(uuid.UUID(attempt_id)),
        "not an id": attempt_id[:-1] + "\udc80",
    }[said.spelled]
    given_token = {
        "own": token,
        "other": token[::-1],
        "not ascii": token[:-1] + "é",
        "a lone surrogate": token[:-1] + "\udc80",  # as JSON may carry one
    }[said.token]
    return Report(
        spelled,
        given_token,
        said.exit_code,
        reason=said.reason,
        requeue=said.requeue,
        usage=Usage(cost_usd=0.25, input_tokens=10) if said.usage else None,
        session_id="s-1" if said.session else None,
        resumable=said.resumable,
        denied=("Bash",) if said.denied else (),
        ended_ago=said.ended_ago,
    )


Fresh = Callable[[], contextlib.AbstractContextManager[Store]]


@pytest.fixture
def fresh(store_url: str) -> Fresh:
    """A new, empty store of the test's backend at each call (one per example)."""

    @contextlib.contextmanager
    def make() -> Iterator[Store]:
        with contextlib.ExitStack() as undo:
            if "://" in store_url:  # PostgreSQL: a schema of its own, dropped afterwards
                url = undo.enter_context(fresh_schema(store_url))
            else:
                url = str(Path(undo.enter_context(tempfile.TemporaryDirectory())) / "s.db")
            store = open_store(url)
            undo.callback(store.close)
            yield store

    return make


def _reports(store: Store, cases: list[tuple[Run, Said]], throttled: bool = False) -> list[Report]:
    """Start one run per case and make each as its case says; their reports. If
    `throttled`, the agent type `claude` is in back-off by then (its provider refused a
    run), which a success steps it out of."""
    kinds = frozenset({"command", "callable"})
    store.set_setting("max_concurrent", len(cases))
    # A hold of a second at most, and no cap on claude's runs below the store's.
    rule = {"exit_codes": [75], "delay": 1, "max_delay": 1, "min_concurrent": len(cases)}
    store.set_backoff("claude", rule)
    store.submit({"callable": "g", "agent": "claude"}, now=NOW)
    [first] = store.claim("n", now=NOW, kinds=kinds, functions=frozenset({"g"})).claims
    # Refused by its provider (then back in line), or done: the last end drains the line.
    store.finish(first.attempt.id, first.attempt.token, 75 if throttled else 0, now=NOW)
    assert bool(store.throttles()) == throttled
    parent = store.submit({"command": ["true"], "hold": True}, now=NOW)
    held = []
    for n, (run, _) in enumerate(cases):
        spec: dict[str, Any] = {"callable": "f"} if run.function else {"command": ["true"]}
        spec |= {
            "keyed": {"key": f"k-{n}"},
            "child": {"parent_id": parent.id},
            "second attempt": {"max_attempts": 2, "backoff": 1},
            "needs input": {"interactive": True},
            "needs input, slot given back": {"interactive": True},
        }.get(run.shape, {})
        # Held but for those to start and fail first (then in line again, in their place).
        first = run.shape == "second attempt"
        task = store.submit({**spec, "agent": run.agent, "hold": not first}, now=NOW)
        held += [] if first else [task.id]
    # (after claude's hold of a second, if it is in back-off)
    retried = store.claim("n", now=NOW + 2, kinds=kinds, functions=frozenset({"f"})).claims
    for claim in retried:
        store.finish(claim.attempt.id, claim.attempt.token, 1, now=NOW + 2)
    for task_id in held:
        store.release(task_id)
    claims = store.claim("n", now=NOW + 5, kinds=kinds, functions=frozenset({"f"})).claims
    assert len(claims) == len(cases)
    reports = []
    for claim, (run, said) in zip(claims, cases, strict=True):
        task, attempt = claim.task, claim.attempt
        assert attempt.number == (2 if run.shape == "second attempt" else 1)
        if not run.function and run.spawned:  # a command's process, as its node records it
            store.record_start(attempt.id, attempt.token, 4242, NOW + 5)
        if run.shape == "parent":
            store.submit({"command": ["true"], "parent_id": task.id, "hold": True}, now=NOW + 6)
        elif run.shape == "stalled":
            assert store.mark_stalled(task.id, attempt.id, "quiet", now=NOW + 6)
        elif run.shape.startswith("needs input"):
            release = run.shape.endswith("given back")
            assert store.mark_needs_input(task.id, attempt.id, "asks", NOW + 6, release)
        if run.depended_on:
            store.submit({"command": ["true"], "depends_on": [task.id]}, now=NOW + 6)
        if run.asked_to_stop and run.stop == "cancel":
            store.cancel(task.id)
        elif run.asked_to_stop and run.stop == "terminate":
            store.terminate(task.id, "by the test")
        elif run.asked_to_stop:
            store.restart(task.id, force=True)
        if run.ended:
            # (failed: a success would step claude out of its back-off before the test)
            store.finish(attempt.id, attempt.token, 1, now=NOW + 7)
        reports.append(_report(attempt.id, attempt.token, said))
    return reports


def _state(tx: Tx, appended_from: int) -> dict[str, Any]:
    tables = {}
    for name in TABLES:
        tx.cursor.execute(f"SELECT * FROM {name} ORDER BY 1")
        tables[name] = tx.cursor.fetchall()
    return {**tables, "events": tx.events[appended_from:]}


def _outcome(
    tx: Tx, report: Report, ending: Callable[[list[tuple[str | None, float]]], str]
) -> dict[str, Any]:
    """What `ending` of `report` leaves in `tx` (its state, its run times, what it
    returned or the refusal it raised), undone afterwards."""
    appended = len(tx.events)
    tx.cursor.execute("SAVEPOINT compare")
    times: list[tuple[str | None, float]] = []
    try:
        # As in a claim: on PostgreSQL the report's rows read ahead first.
        with read_ahead.read_ahead(tx, [report]):
            result: Any = ending(times)
        tx.run_last_checks()  # what an end leaves for the commit (the `drained` event)
    except SlotlineError as exc:
        result = (type(exc), str(exc))
    found = {"result": result, "times": times, **_state(tx, appended)}
    tx.cursor.execute("ROLLBACK TO SAVEPOINT compare")
    tx.cursor.execute("RELEASE SAVEPOINT compare")
    del tx.events[appended:]
    return found


class _Undo(Exception):
    """Raised to roll the comparison's transaction back."""


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cases=st.lists(st.tuples(run_strategy, said_strategy), min_size=1, max_size=4),
    throttled=st.booleans(),
)
def test_the_plain_end_leaves_the_store_as_the_end_of_any_run_does(
    fresh: Fresh, cases: list[tuple[Run, Said]], throttled: bool
) -> None:
    with fresh() as store:
        reports = _reports(store, cases, throttled)
        with pytest.raises(_Undo):
            _compare(store, reports, NOW + 10)


def _compare(store: Store, reports: list[Report], now: float) -> None:
    """Each of `reports` ended both ways, one after the other in one transaction (which
    it then rolls back): both ways leave the same."""
    with store._write() as tx:
        for report in reports:
            plain = _outcome(tx, report, functools.partial(plain_end.end, tx, report, now))
            general = _outcome(tx, report, functools.partial(runs.end, tx, report, now, None))
            assert plain == general
            # Then the next report finds the store as a claim leaves it.
            with contextlib.suppress(SlotlineError):
                runs.end(tx, report, now, None, [])
        raise _Undo


def _one_thing_otherwise() -> list[tuple[Run, Said]]:
    """Plain ends (of a function, a command, with and without an agent type), then
    each that is plain but for one thing, of its run or of its report."""
    plain = [
        Run(f, agent, False, False, False, True)
        for f in (True, False)
        for agent in (None, "claude")
    ]
    cases = [(run, PLAIN) for run in plain]
    for name, values in OTHERWISE.items():
        cases += [(run, replace(PLAIN, **{name: value})) for value in values for run in plain[1:3]]
    for name in ("depended_on", "ended", "spawned"):
        cases += [(replace(run, **{name: not getattr(run, name)}), PLAIN) for run in plain[1:3]]
    for stop in STOPS:
        cases += [(replace(run, asked_to_stop=True, stop=stop), PLAIN) for run in plain[1:3]]
    for shape in SHAPES:
        commands = [run for run in plain if not run.function]
        cases += [(replace(run, shape=shape), PLAIN) for run in commands]
    return cases


@pytest.mark.parametrize("throttled", [False, True])
def test_each_thing_that_makes_an_end_not_plain_is_seen(fresh: Fresh, throttled: bool) -> None:
    """Every end that is plain but for one thing ends as `runs.end` ends it (the random
    cases above meet each of these only now and then)."""
    with fresh() as store:
        reports = _reports(store, _one_thing_otherwise(), throttled)
        with pytest.raises(_Undo):
            # (and a plain report given twice in one claim: the second finds it ended)
            _compare(store, [*reports, reports[0]], NOW + 10)


def test_a_run_that_succeeded_ends_plainly(fresh: Fresh, monkeypatch: pytest.MonkeyPatch) -> None:
    """The common end does not go through `runs.end` (the test above would pass if the
    plain end never took its own way)."""

    def refused(*_: object) -> str:
        raise AssertionError("a plain end went to runs.end")

    monkeypatch.setattr(plain_end, "any_end", refused)
    with fresh() as store:
        [report] = _reports(store, [(Run(True, "claude", False, False, False, True), PLAIN)])
        store.claim("n", now=NOW + 10, finished=[report])
        [task] = [t for t in store.list_tasks() if t.callable == "f"]
        assert task.status == "succeeded"
        kinds = [event.kind for event in store.task_events(task.id)]
        assert kinds[-1] == "succeeded"
