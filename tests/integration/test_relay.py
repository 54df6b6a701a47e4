"""The claim made in the thread where a function's run ended (`node/relay.py`): a run's
end and the next start in one claim, without the loop's hops, on both stores."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from overlap import peak
from slotline.errors import StoreError
from slotline.models import Status
from slotline.node.node import Node
from slotline.node.relay import end_in_thread
from slotline.node.run import Relayed
from slotline.node.run import Run as SupervisedRun
from slotline.store import ClaimResult, Store
from waiting import until_async


def relays(node: Node) -> int:
    assert node.supervisor.relay is not None
    return node.supervisor.relay.count


def test_a_line_of_functions_hands_each_slot_on_from_the_thread_that_ended(
    store: Store, tmp_path: Path
) -> None:
    # Given a limit of one and ten sync functions in line, each noting when it ran,
    ran: list[tuple[int, float, float]] = []

    def note(n: int) -> None:
        began = time.time()
        ran.append((n, began, time.time()))

    store.set_setting("max_concurrent", 1)
    tasks = [store.submit({"callable": "note", "args": {"n": n}}) for n in range(10)]
    node = Node(store, log_dir=tmp_path / "logs", callables={"note": note})
    # when a node runs the line,
    asyncio.run(node.run_until_idle(timeout=60))
    # then each ran once, in line order, one at a time, and succeeded once;
    assert [n for n, _, _ in ran] == list(range(10))
    assert peak((a.started_at, a.finished_at) for a in store.attempts()) == 1
    for task in tasks:
        shown = store.get(task.id)
        assert shown.status is Status.SUCCEEDED
        assert [e.kind for e in store.task_events(task.id)].count("succeeded") == 1
    # and most ends were committed by the thread that ran them (the loop may be
    # claiming at the moment one ends: that end then goes with the loop's claim).
    assert relays(node) >= 5


def test_a_function_that_returns_a_value_keeps_it(store: Store, tmp_path: Path) -> None:
    # Given functions in line, one of which returns a value,
    def plain() -> None:
        return None

    def answer() -> dict[str, int]:
        return {"answer": 42}

    store.set_setting("max_concurrent", 1)
    first = store.submit({"callable": "plain"})
    valued = store.submit({"callable": "answer"})
    last = store.submit({"callable": "plain"})
    node = Node(store, log_dir=tmp_path / "logs", callables={"plain": plain, "answer": answer})
    # when the node runs them,
    asyncio.run(node.run_until_idle(timeout=60))
    # then the value is the task's result (kept before its end, not relayed),
    assert store.get(valued.id).result == {"answer": 42}
    # and the others succeeded with none.
    for task in (first, last):
        assert store.get(task.id).status is Status.SUCCEEDED
        assert store.get(task.id).result is None


def test_a_relay_the_store_refuses_is_committed_by_the_loop(store: Store, tmp_path: Path) -> None:
    # Given a node whose claims made where a run ended fail, the first three times,
    def work() -> None:
        return None

    store.set_setting("max_concurrent", 1)
    tasks = [store.submit({"callable": "work"}) for _ in range(6)]
    node = Node(store, log_dir=tmp_path / "logs", callables={"work": work})
    relay = node.supervisor.relay
    assert relay is not None
    real, failures = relay._claimer, {"left": 3}

    def failing(finished: Any) -> ClaimResult:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise StoreError("the store is briefly unavailable")
        return real(finished)

    relay._claimer = failing
    # when the node runs them,
    asyncio.run(node.run_until_idle(timeout=60))
    # then every failed relay's end was committed by the loop instead, once.
    assert failures["left"] == 0
    for task in tasks:
        assert store.get(task.id).status is Status.SUCCEEDED
        assert [e.kind for e in store.task_events(task.id)].count("succeeded") == 1


@pytest.mark.parametrize(
    "behind", [{"callable": "never"}, {"command": ["true"]}], ids=["function", "command"]
)
def test_what_a_relay_claims_as_the_node_stops_goes_back_in_line_unstarted(
    store: Store, tmp_path: Path, behind: dict[str, Any]
) -> None:
    # Given a quick function and, behind it, a task that must not start,
    relaying, go, began = (threading.Event() for _ in range(3))

    def quick() -> None:
        return None

    def never() -> None:
        began.set()

    store.set_setting("max_concurrent", 1)
    first = store.submit({"callable": "quick", "max_attempts": 1})
    second = store.submit({**behind, "max_attempts": 1})
    node = Node(store, log_dir=tmp_path / "logs", callables={"quick": quick, "never": never})
    relay = node.supervisor.relay
    assert relay is not None
    real = relay._claimer

    def held(finished: Any) -> ClaimResult:  # the first relay waits for the test
        relaying.set()
        go.wait(30)
        return real(finished)

    relay._claimer = held

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(node.run(stop))
        # when the node is told to stop while the quick one's thread claims the next,
        await until_async(relaying.is_set, what="the relay claims")
        stop.set()
        await until_async(lambda: node.supervisor.stopping, what="the node stops")
        go.set()
        await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    # then the quick one succeeded, and what that claim took went back in line without
    # starting, its attempt not counted: no task is left running.
    assert store.get(first.id).status is Status.SUCCEEDED
    put_back = store.get(second.id)
    assert put_back.status is Status.QUEUED
    assert not began.is_set()
    assert [e.kind for e in store.task_events(second.id)][-1] == "requeued"
    assert put_back.attempts[-1].pid is None


def test_an_end_past_its_timeout_or_with_a_value_is_not_relayed(
    store: Store, tmp_path: Path
) -> None:
    # Given a node whose only run is a function,
    node = Node(store, log_dir=tmp_path / "logs")
    store.submit({"callable": "f"})
    [claim] = store.claim("n", kinds=frozenset({"callable"})).claims
    relay = node.supervisor.relay
    assert relay is not None
    relay.open = True

    async def scenario() -> None:
        run = SupervisedRun(claim.task, claim.attempt)
        node.supervisor.runs[claim.attempt.id] = run
        loop = asyncio.get_running_loop()
        # when it returned a value, or None after its timeout's moment (the loop not
        # there yet to say so), its end is left to the loop;
        end_in_thread(node.supervisor, run, {"value": 1})
        run.timer = loop.call_at(loop.time() - 1, lambda: None)
        end_in_thread(node.supervisor, run, None)
        assert run.relayed is None
        assert relay.count == 0
        assert not run.finishing
        # and in time, with nothing to keep, the thread commits it, the run marked
        # finishing first (the heartbeat's fence must not take it for one gone).
        run.timer = loop.call_at(loop.time() + 60, lambda: None)
        end_in_thread(node.supervisor, run, None)
        assert run.relayed is not None
        assert relay.count == 1
        assert run.finishing
        run.timer.cancel()

    asyncio.run(scenario())


def test_the_loop_wakes_sooner_when_a_relay_says_so(tmp_path: Path, store: Store) -> None:
    # Given a node asleep until some time,
    node = Node(store, log_dir=tmp_path / "logs")
    claimed = (0.0, 0.0)
    started: Any = object()  # a claim's start: only counted here

    async def scenario() -> None:
        node._sleep_until = 1000.0
        # a relay whose claim started a run and wants a look later changes nothing,
        node._relayed(Relayed(ClaimResult([started], 1000.5), claimed))
        assert not node._retime.is_set()
        assert not node._changed.is_set()
        # one that wants it sooner makes the loop count its sleep again (no claim),
        node._relayed(Relayed(ClaimResult([started], 999.0), claimed))
        assert node._retime.is_set()
        assert not node._changed.is_set()
        assert node._claim_wake == 999.0
        # and one that started nothing wakes it to claim (the line may be done).
        node._retime.clear()
        node._relayed(Relayed(ClaimResult([], None), claimed))
        assert node._changed.is_set()

    asyncio.run(scenario())
