"""The store's side of cost and resume, on every backend: a resumable end, the session a
run resumed (on its attempt and its `started` event), `terminate(resumable=True)`,
follow-up tasks, and the spend per agent type that /metrics exports."""

from __future__ import annotations

import asyncio

import pytest

from slotline.config.agent_types import AgentType
from slotline.errors import InvalidInput
from slotline.models import ResumedFrom, Status, Usage
from slotline.node.resume import plan_resume
from slotline.store import Store

AGENT = {"command": ["true"], "agent": "claude"}


def test_an_interrupted_end_is_resumable_and_the_next_start_records_what_it_resumed(
    store: Store,
) -> None:
    task = store.submit({**AGENT, "max_attempts": 2})
    first = store.claim("node-a").claims[0].attempt
    store.finish(first.id, first.token, None, "interrupted", session_id="s-1", resumable=True)
    store.set_setting("max_concurrent", 3)
    second = store.claim("node-a", now=store.get(task.id).not_before).claims[0].attempt
    store.record_start(second.id, second.token, 123, None, None, ResumedFrom(task.id, 1))

    one, two = store.get(task.id).attempts
    assert one.resumable
    assert one.session_id == "s-1"
    assert not two.resumable
    assert two.resumed_from == ResumedFrom(task.id, 1)
    started = [e for e in store.events(0) if e.kind == "started"]
    assert started[-1].data["resumed_from"] == {"task_id": task.id, "attempt": 1}


def test_terminate_resumable_marks_the_running_attempt(store: Store) -> None:
    task = store.submit(AGENT)
    attempt = store.claim("node-a").claims[0].attempt
    store.terminate(task.id, "reboot", resumable=True)
    store.finish(attempt.id, attempt.token, None, "stopped")
    ended = store.get(task.id)
    assert ended.status is Status.FAILED
    assert ended.attempts[0].resumable
    other = store.submit(AGENT)
    attempt = store.claim("node-a").claims[0].attempt
    store.terminate(other.id, "done with it")
    store.finish(attempt.id, attempt.token, None, "stopped")
    assert not store.get(other.id).attempts[0].resumable


def test_a_followup_depends_on_its_task_and_says_what_it_follows(store: Store) -> None:
    followed = store.submit(AGENT)
    follow = store.submit_followup(followed.id[:8], "and test it", AGENT)
    assert list(follow.depends_on) == [followed.id]
    assert follow.status is Status.WAITING
    found = store.followup_of(follow.id)
    assert found is not None
    assert (found.follows, found.prompt) == (followed.id, "and test it")
    assert store.followup_of(followed.id) is None
    assert any(e.kind == "followup" and e.task_id == follow.id for e in store.events(0))
    plain = store.submit({"command": ["true"]})
    with pytest.raises(InvalidInput, match="has no agent type"):
        store.submit_followup(plain.id, "go", AGENT)


def test_spend_by_agent_sums_the_runs_that_reported_usage(store: Store) -> None:
    store.set_setting("max_concurrent", 5)
    spent = [Usage(0.5, 100, None), Usage(0.25, 50, 7), None]
    for usage in spent:
        store.submit(AGENT)
        attempt = store.claim("node-a").claims[0].attempt
        store.finish(attempt.id, attempt.token, 0, usage=usage)
    store.submit({"command": ["true"]})
    attempt = store.claim("node-a").claims[0].attempt
    store.finish(attempt.id, attempt.token, 0, usage=Usage(None, None, 3))
    rows = {row.key: row for row in store.spend_by_agent()}
    assert set(rows) == {"claude", "-"}
    claude = rows["claude"]
    assert (claude.runs, claude.cost_usd, claude.input_tokens, claude.output_tokens) == (
        2, 0.75, 150, 7,
    )  # fmt: skip
    assert (rows["-"].cost_usd, rows["-"].output_tokens) == (None, 3)


RESUMING = AgentType.model_validate(
    {
        "command": ["agent", "{prompt}"],
        "resume": ["agent", "--resume", "{session_id}", "{prompt}"],
        "usage": {"json": {"session_id": "session_id"}},
    }
)


def test_a_resumed_run_the_provider_refused_leaves_the_session_to_resume(store: Store) -> None:
    # Given a run cut short with its session (resumable), and the next one that resumed
    # it refused by the provider (throttled: its session read from what it resumed),
    store.set_backoff("claude", {"exit_codes": [75], "delay": 1, "max_delay": 1})
    store.set_setting("max_concurrent", 3)
    task = store.submit({**AGENT, "max_attempts": 3})
    first = store.claim("node-a").claims[0].attempt
    store.finish(first.id, first.token, None, "interrupted", session_id="s-1", resumable=True)
    later = store.get(task.id).not_before + 1
    second = store.claim("node-a", now=later).claims[0].attempt
    store.record_start(second.id, second.token, 123, None, None, ResumedFrom(task.id, 1))
    store.finish(second.id, second.token, 75, now=later + 1, session_id="s-1")
    assert store.get(task.id).attempts[1].outcome == "throttled"
    # when the next attempt starts, it resumes the first run's session all the same.
    third = store.claim("node-a", now=later + 100).claims[0]
    plan = asyncio.run(plan_resume(store, {"claude": RESUMING}, third.task, third.attempt))
    assert plan is not None
    assert plan.resumed_from == ResumedFrom(task.id, 1)
    assert plan.argv == ["agent", "--resume", "s-1", plan.argv[-1]]


def test_a_second_followup_continues_the_first_ones_session(store: Store) -> None:
    # Given a task whose run printed session s-1, and a follow-up whose run printed s-2,
    store.set_setting("max_concurrent", 3)
    task = store.submit(AGENT)
    run = store.claim("node-a").claims[0].attempt
    store.finish(run.id, run.token, 0, session_id="s-1")
    first = store.submit_followup(task.id, "now add tests", AGENT)
    claimed = store.claim("node-a").claims[0]
    assert claimed.task.id == first.id
    plan = asyncio.run(plan_resume(store, {"claude": RESUMING}, claimed.task, claimed.attempt))
    assert plan is not None
    assert plan.session_id == "s-1"
    store.record_start(claimed.attempt.id, claimed.attempt.token, 123, None, None,
                       plan.resumed_from)  # fmt: skip
    store.finish(claimed.attempt.id, claimed.attempt.token, 0, session_id="s-2")
    # when a second follow-up of the task starts,
    second = store.submit_followup(task.id, "now document it", AGENT)
    claimed = store.claim("node-a").claims[0]
    assert claimed.task.id == second.id
    plan = asyncio.run(plan_resume(store, {"claude": RESUMING}, claimed.task, claimed.attempt))
    # then it continues from where the first follow-up left off.
    assert plan is not None
    assert plan.session_id == "s-2"
    assert plan.resumed_from == ResumedFrom(first.id, 1)
    assert plan.argv == ["agent", "--resume", "s-2", "now document it"]


@pytest.mark.parametrize(
    "placeholder",
    [
        pytest.param("<session of {followed}>", id="placeholder"),
        pytest.param("{session_id}", id="queued-before-placeholders"),
    ],
)
def test_a_started_followup_shows_the_session_it_continued(store: Store, placeholder: str) -> None:
    # Given a follow-up whose stored command holds its session to be: the placeholder,
    # or the template's literal `{session_id}` of one queued before placeholders
    followed = store.submit(AGENT)
    done = store.claim("node-a").claims[0].attempt
    store.finish(done.id, done.token, 0, session_id="sess-7")
    session = placeholder.replace("{followed}", followed.id[:8])
    argv = ["claude", "--resume", session, "-p", "and test it"]
    follow = store.submit_followup(followed.id, "and test it", {**AGENT, "command": argv})

    # When it starts, continuing that session
    started = store.claim("node-a").claims[0].attempt
    store.record_start(
        started.id, started.token, 123, None, None, ResumedFrom(followed.id, 1, "sess-7")
    )

    # Then its command shows the session it continued
    shown = store.get(follow.id)
    assert shown.command_run == ("claude", "--resume", "sess-7", "-p", "and test it")
    assert shown.to_dict()["command"] == ["claude", "--resume", "sess-7", "-p", "and test it"]
