"""The transition check: what it allows, and what its refusals tell the user to do."""

from __future__ import annotations

import dataclasses

import pytest

from slotline.errors import InvalidInput, InvalidTransition
from slotline.models import Kind, Priority, Status, Task
from slotline.stops import CANCEL, RESTART, StopKind, StopRequest
from slotline.transitions import TRANSITIONS, check_transition

TASK_ID = "3f2a9c0e77b1"


def test_every_move_in_the_table_is_allowed_and_leads_where_the_table_says() -> None:
    for verb, moves in TRANSITIONS.items():
        for status, target in moves.items():
            assert check_transition(verb, TASK_ID, status) is target


def test_every_move_not_in_the_table_is_refused_with_the_task_and_its_state() -> None:
    for verb, moves in TRANSITIONS.items():
        for status in set(Status) - set(moves):
            with pytest.raises(InvalidTransition) as refused:
                check_transition(verb, TASK_ID, status)
            assert str(refused.value).startswith(f"cannot {verb} task 3f2a9c0e: it is {status}; ")
            assert refused.value.details == {"task_id": TASK_ID, "status": status}


@pytest.mark.parametrize(
    ("verb", "status", "advice"),
    [
        # a hint written for this case
        ("restart", Status.RUNNING, "cancel it first or use --force"),
        ("terminate", Status.QUEUED, "use cancel for a task that has not started"),
        # an ended task, with no hint of its own
        ("hold", Status.SUCCEEDED, "it has ended; restart it first"),
        # otherwise: the states the verb applies to, in order
        ("expire", Status.RUNNING, "expire applies to: held, queued, waiting"),
        ("claim", Status.HELD, "claim applies to: queued"),
    ],
)
def test_a_refusal_says_what_to_do_instead(verb: str, status: Status, advice: str) -> None:
    with pytest.raises(InvalidTransition) as refused:
        check_transition(verb, TASK_ID, status)
    assert str(refused.value) == f"cannot {verb} task 3f2a9c0e: it is {status}; {advice}"


def test_an_unknown_limit_key_is_named_in_the_error() -> None:
    task = Task(
        id=TASK_ID, kind=Kind.COMMAND, command=("true",), callable=None, args={}, title="t",
        agent="claude", workspace="w", user="ann", labels={"team": "a"}, env={},
        priority=Priority.NORMAL, boosted=False, start_now=False, rank="1",
        status=Status.QUEUED, status_reason=None, depends_on=(), parent_id=None, depth=0,
        max_attempts=1, backoff=1.0, timeout=None, queue_ttl=None, not_before=None,
        kill_request=None, restart_requested=False, created_at=0.0, queued_at=0.0,
        started_at=None, finished_at=None, exit_code=None, failure_reason=None,
        attempt_count=0, attempt_base=0, current_attempt=None,
    )  # fmt: skip
    assert [task.key_value(k) for k in ("agent", "workspace", "user", "label:team")] == [
        "claude", "w", "ann", "a",
    ]  # fmt: skip
    assert dataclasses.replace(task, labels={}).key_value("label:team") is None
    with pytest.raises(InvalidInput, match="unknown limit key 'colour'"):
        task.key_value("colour")


def test_a_stop_request_reads_back_what_it_stores_and_refuses_what_it_does_not_know() -> None:
    for stop in (CANCEL, RESTART, StopRequest.terminate("stuck: in a loop")):
        assert StopRequest.read(str(stop)) == stop
    assert str(StopRequest.terminate("stuck")) == "terminate:stuck"
    assert StopRequest.read("terminate:stuck").stop_reason == "terminated: stuck"
    assert StopRequest.parse(None) is None
    with pytest.raises(InvalidInput, match="unknown stop request 'pause'"):
        StopRequest.read("pause")


def test_each_stop_ends_its_running_task_by_a_move_of_the_table() -> None:
    ends = {stop.kind: check_transition(stop.verb, TASK_ID, Status.RUNNING) for stop in (
        CANCEL, RESTART, StopRequest.terminate("x"))}  # fmt: skip
    assert ends == {
        StopKind.CANCEL: Status.CANCELLED,
        StopKind.RESTART: Status.QUEUED,
        StopKind.TERMINATE: Status.FAILED,
    }
