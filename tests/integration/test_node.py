"""A real node running real processes against a real SQLite store."""

from __future__ import annotations

import asyncio
import errno
import logging
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from overlap import peak
from slotline.config.file import Admission
from slotline.errors import InvalidInput, StoreError
from slotline.models import Status, Task
from slotline.node.admission import Guard, Sample
from slotline.node.node import Node
from slotline.runner.capabilities import CAPS
from slotline.runner.process import process_start_time
from slotline.store import Store, open_store
from waiting import until, until_async


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "store.db")
    yield s
    s.close()


@asynccontextmanager
async def running_node(store: Store, tmp_path: Path, **options: object) -> AsyncIterator[Node]:
    options.setdefault("kill_grace", 2.0)
    node = Node(store, log_dir=tmp_path / "logs", **options)  # type: ignore[arg-type]
    stop = asyncio.Event()
    task = asyncio.create_task(node.run(stop))
    try:
        yield node
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


def has_pid(store: Store, task_id: str) -> bool:
    attempts = store.get(task_id).attempts
    return bool(attempts) and attempts[-1].pid is not None


def claim_ends(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each claim on `store` returned (monotonic clock); the real claim runs. A test
    that needs the node to have looked at the queue waits on this, not on a sleep."""
    ends: list[float] = []
    real = store.claim

    def claim(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        ends.append(time.monotonic())
        return result

    monkeypatch.setattr(store, "claim", claim)
    return ends


def calls_started(store: Store, verb: str, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each call of `verb` on `store` began (monotonic clock); the real verb runs."""
    starts: list[float] = []
    real = getattr(store, verb)

    def call(*args: Any, **kwargs: Any) -> Any:
        starts.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(store, verb, call)
    return starts


def submit(store: Store, *argv: str, **fields: object) -> Task:
    return store.submit({"command": list(argv), **fields})


def test_limit_is_respected_and_every_task_runs(store: Store, tmp_path: Path) -> None:
    store.set_setting("max_concurrent", 2)
    tasks = [submit(store, "sleep", "0.2") for _ in range(6)]

    async def scenario() -> None:
        node = Node(store, log_dir=tmp_path / "logs")
        await node.run_until_idle(timeout=30)

    asyncio.run(scenario())
    assert all(store.get(t.id).status is Status.SUCCEEDED for t in tasks)
    assert peak((a.started_at, a.finished_at) for a in store.attempts()) == 2


def test_priority_order_decides_who_starts_first(store: Store, tmp_path: Path) -> None:
    store.set_setting("max_concurrent", 1)
    low = submit(store, "true", priority="low")
    normal = submit(store, "true")
    urgent = submit(store, "true", priority="P0")

    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))
    starts = {a.task_id: a.started_at for a in store.attempts()}
    assert starts[urgent.id] < starts[normal.id] < starts[low.id]


def test_failure_records_exit_code_and_reason(store: Store, tmp_path: Path) -> None:
    failing = submit(store, "sh", "-c", "echo boom; exit 3")
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))

    task = store.get(failing.id)
    assert task.status is Status.FAILED
    assert task.exit_code == 3
    assert task.failure_reason == "exit code 3"
    log_path = task.attempts[0].log_path
    assert log_path is not None
    assert Path(log_path).read_text() == "boom\n"


def test_missing_command_and_workspace_fail_with_the_reason(store: Store, tmp_path: Path) -> None:
    missing = submit(store, "no-such-program-xyz")
    nowhere = submit(store, "true", workspace=str(tmp_path / "gone"))
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))

    assert store.get(missing.id).failure_reason == "command not found: no-such-program-xyz"
    assert store.get(nowhere.id).failure_reason == f"workspace {tmp_path / 'gone'} does not exist"


@pytest.mark.parametrize("memory_mb", [None, 4096], ids=["spawned", "forked-for-a-memory-cap"])
def test_a_program_that_cannot_be_executed_fails_with_exit_127_and_says_why(
    store: Store, tmp_path: Path, memory_mb: int | None
) -> None:
    # Given an executable script whose interpreter does not exist (found on the PATH,
    # so the node's own check passes; only the exec fails, in the keeper),
    script = tmp_path / "broken"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    task = submit(store, str(script), memory_mb=memory_mb)
    # when it runs,
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))
    # then it fails with 127, and its log says what could not be started.
    done = store.get(task.id)
    assert done.status is Status.FAILED
    assert done.exit_code == 127
    log = Path(done.attempts[-1].log_path or "").read_text()
    assert f"slotline: cannot start {script}: No such file or directory" in log


def test_workspace_is_the_working_directory_and_env_is_set(store: Store, tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    task = submit(
        store,
        "sh",
        "-c",
        'pwd > out.txt; echo "$SLOTLINE_TASK_ID $GREETING" >> out.txt',
        workspace=str(work),
        env={"GREETING": "hi"},
    )
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))

    assert (work / "out.txt").read_text() == f"{work}\n{task.id} hi\n"


def test_timeout_terminates_the_process_group(store: Store, tmp_path: Path) -> None:
    slow = submit(store, "sh", "-c", "sleep 30 & sleep 30", timeout=0.5)
    asyncio.run(Node(store, log_dir=tmp_path / "logs", kill_grace=1).run_until_idle(timeout=30))

    task = store.get(slow.id)
    assert task.status is Status.FAILED
    assert task.failure_reason == "timed out after 0.5s"


def test_retry_runs_again_after_backoff(store: Store, tmp_path: Path) -> None:
    marker = tmp_path / "tried"
    flaky = submit(
        store,
        "sh",
        "-c",
        f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; exit 1",
        max_attempts=2,
        backoff=0.1,
    )
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))

    task = store.get(flaky.id)
    assert task.status is Status.SUCCEEDED
    assert [a.outcome for a in task.attempts] == ["failed", "succeeded"]


def test_cancel_of_a_running_process_frees_its_slot(store: Store, tmp_path: Path) -> None:
    store.set_setting("max_concurrent", 1)
    long = submit(store, "sleep", "30")
    nxt = submit(store, "true")

    async def scenario() -> None:
        async with running_node(store, tmp_path):
            await until_async(lambda: has_pid(store, long.id))
            assert store.get(nxt.id).status is Status.QUEUED
            store.cancel(long.id)
            await until_async(lambda: store.get(nxt.id).status is Status.SUCCEEDED)

    asyncio.run(scenario())
    cancelled = store.get(long.id)
    assert cancelled.status is Status.CANCELLED
    # The next task started only after the cancelled process was gone.
    assert cancelled.attempts[0].finished_at is not None
    assert store.get(nxt.id).attempts[0].started_at >= cancelled.attempts[0].finished_at


def test_terminate_fails_the_task_and_starts_the_next(store: Store, tmp_path: Path) -> None:
    store.set_setting("max_concurrent", 1)
    agent = submit(store, "sleep", "30")
    nxt = submit(store, "true")

    async def scenario() -> None:
        async with running_node(store, tmp_path):
            await until_async(lambda: has_pid(store, agent.id))
            store.terminate(agent.id, "stuck")
            await until_async(lambda: store.get(nxt.id).status is Status.SUCCEEDED)

    asyncio.run(scenario())
    assert store.get(agent.id).status is Status.FAILED
    assert store.get(agent.id).failure_reason == "terminated: stuck"


def test_bump_starts_over_the_limit_and_nothing_else_starts(store: Store, tmp_path: Path) -> None:
    store.set_setting("max_concurrent", 1)
    first = submit(store, "sleep", "30")
    waiting = submit(store, "true")
    urgent = submit(store, "sleep", "30")

    async def scenario() -> None:
        async with running_node(store, tmp_path):
            await until_async(lambda: store.get(first.id).status is Status.RUNNING)
            store.bump(urgent.id)
            await until_async(lambda: store.get(urgent.id).status is Status.RUNNING)
            assert store.get(urgent.id).attempts[0].over_limit
            assert store.status().over_limit
            store.cancel(urgent.id)
            await until_async(lambda: store.get(urgent.id).status is Status.CANCELLED)
            # Back at the limit: the queued task still waits for the first one.
            assert store.get(waiting.id).status is Status.QUEUED
            store.cancel(first.id)
            await until_async(lambda: store.get(waiting.id).status is Status.SUCCEEDED)

    asyncio.run(scenario())


def test_submit_from_another_process_wakes_the_node(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a node whose heartbeat (its only timer) is far away, and which has looked at
    # the empty queue (from then on only a wake-up makes it look again),
    # when another process submits a task,
    # then the node starts it: it was woken by the store, not by a poll.
    claims = claim_ends(store, monkeypatch)

    async def scenario() -> None:
        async with running_node(store, tmp_path, heartbeat=300.0):
            await until_async(lambda: claims, what="the node's first claim")
            code = (
                "from slotline.store import open_store;"
                f"open_store({str(store.url.removeprefix('sqlite://'))!r})"
                ".submit({'command': ['true'], 'title': 'from afar'})"
            )
            subprocess.run([sys.executable, "-c", code], check=True)
            await until_async(
                lambda: any(t.status is Status.SUCCEEDED for t in store.list_tasks()),
                timeout=15,
            )

    asyncio.run(scenario())


def test_callable_tasks_run_sync_and_async_functions(store: Store, tmp_path: Path) -> None:
    seen: list[str] = []

    def greet(name: str) -> None:
        seen.append(f"sync {name}")

    async def boom() -> None:
        raise RuntimeError("nope")

    ok = store.submit({"callable": "greet", "args": {"name": "ada"}})
    bad = store.submit({"callable": "boom"})
    node = Node(store, log_dir=tmp_path / "logs", callables={"greet": greet, "boom": boom})
    asyncio.run(node.run_until_idle(timeout=30))

    assert seen == ["sync ada"]
    assert store.get(ok.id).status is Status.SUCCEEDED
    assert store.get(bad.id).failure_reason == "RuntimeError: nope"


def test_an_agent_started_before_a_restart_is_readopted(store: Store, tmp_path: Path) -> None:
    agent = submit(store, "sh", "-c", "sleep 1; echo done; exit 4")

    async def first_life() -> None:
        async with running_node(store, tmp_path):
            await until_async(lambda: has_pid(store, agent.id))

    asyncio.run(first_life())
    assert store.get(agent.id).status is Status.RUNNING  # the process outlived the node

    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))
    task = store.get(agent.id)
    assert task.status is Status.FAILED
    assert task.exit_code == 4
    assert len(task.attempts) == 1
    log_path = task.attempts[0].log_path
    assert log_path is not None
    assert Path(log_path).read_text() == "done\n"


def test_log_is_cut_at_its_cap_with_a_visible_marker(store: Store, tmp_path: Path) -> None:
    noisy = submit(store, "sh", "-c", "yes 0123456789 | head -c 100000; echo; exit 0")
    node = Node(store, log_dir=tmp_path / "logs", log_max_bytes=2000)
    asyncio.run(node.run_until_idle(timeout=30))

    task = store.get(noisy.id)
    assert task.status is Status.SUCCEEDED
    assert task.attempts[0].log_path is not None
    text = Path(task.attempts[0].log_path).read_text()
    assert text.startswith("0123456789\n")
    assert "[slotline: log cap of 2000 bytes reached; the rest is dropped]" in text
    assert re.search(r"\[slotline: 9\d{4} bytes of output dropped\]\n$", text)
    assert len(text) < 2200


def test_background_children_do_not_keep_an_attempt_running(store: Store, tmp_path: Path) -> None:
    # A command that exits but leaves a child holding its output open is done; the child
    # is killed with the rest of the process group.
    leaver = submit(store, "sh", "-c", "sleep 30 & echo started")
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=20))

    task = store.get(leaver.id)
    assert task.status is Status.SUCCEEDED
    assert task.attempts[0].finished_at is not None


HOG = [sys.executable, "-c", "x = bytearray(400 * 1024 * 1024); print('allocated')"]


@pytest.mark.skipif(not CAPS.rlimit_as, reason="no memory cap is enforced on this platform")
def test_memory_cap_stops_a_run_that_allocates_past_it(store: Store, tmp_path: Path) -> None:
    hog = HOG
    capped = store.submit({"command": hog, "memory_mb": 200})
    free = store.submit({"command": hog})
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=60))

    assert store.get(free.id).status is Status.SUCCEEDED
    task = store.get(capped.id)
    assert task.status is Status.FAILED
    log_path = task.attempts[0].log_path
    assert log_path is not None
    assert "MemoryError" in Path(log_path).read_text()


@pytest.mark.skipif(CAPS.rlimit_as, reason="this platform enforces the memory cap")
def test_where_no_memory_cap_is_enforced_a_run_goes_on_and_its_log_says_so(
    store: Store, tmp_path: Path
) -> None:
    capped = store.submit({"command": HOG, "memory_mb": 200})
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=60))

    task = store.get(capped.id)
    assert task.status is Status.SUCCEEDED
    log_path = task.attempts[0].log_path
    assert log_path is not None
    assert Path(log_path).read_text() == (
        f"[slotline: memory cap of 200 MB not enforced: this platform ({sys.platform}) "
        "has no enforced RLIMIT_AS]\nallocated\n"
    )


def test_cpu_and_memory_of_the_process_tree_are_recorded(store: Store, tmp_path: Path) -> None:
    busy = submit(store, "sh", "-c", "sleep 1.5 & sleep 1.5; wait")

    async def scenario() -> None:
        async with running_node(store, tmp_path, heartbeat=0.1):
            await until_async(lambda: store.get(busy.id).status is Status.SUCCEEDED)

    asyncio.run(scenario())
    attempt = store.get(busy.id).attempts[0]
    assert attempt.peak_rss_bytes is not None
    assert attempt.peak_rss_bytes > 1024 * 1024
    assert attempt.rss_bytes is not None
    assert attempt.peak_cpu_percent is not None


def test_admission_guard_holds_new_starts_while_the_machine_is_pressed(
    store: Store, tmp_path: Path
) -> None:
    readings = {"cpu": 99.0}
    guard = Guard(
        Admission(max_cpu_percent=90),
        sampler=lambda: Sample(cpu_percent=readings["cpu"], available_mb=10_000),
    )
    waiting = submit(store, "true")

    async def scenario() -> None:
        async with running_node(store, tmp_path, guard=guard) as node:
            node.duties.guard_interval = 0.05
            await until_async(lambda: store.status().admission is not None)
            assert store.status().admission == "CPU at 99% (limit 90%)"
            assert store.get(waiting.id).status is Status.QUEUED
            readings["cpu"] = 10.0
            await until_async(lambda: store.get(waiting.id).status is Status.SUCCEEDED)
            assert store.status().admission is None

    asyncio.run(scenario())
    kinds = [e.kind for e in store.events()]
    assert kinds.count("admission") == 2


def test_the_adaptive_guards_limit_is_in_the_store_and_the_etas_play_it(
    store: Store, tmp_path: Path
) -> None:
    # Given room for 3 and a machine pressed from the start, in adaptive mode…
    store.set_setting("max_concurrent", 3)
    guard = Guard(
        Admission(max_cpu_percent=90, adaptive=True),
        sampler=lambda: Sample(cpu_percent=99.0, available_mb=10_000),
    )

    async def scenario() -> None:
        async with running_node(store, tmp_path, guard=guard) as node:
            node.duties.guard_interval = 0.05
            await until_async(lambda: store.status().admission is not None)
            # …the guard lets one run at a time, and the estimates of the line say so.
            first = submit(store, "sleep", "30", expected_duration=30)
            second = submit(store, "true", expected_duration=1)
            await until_async(lambda: store.get(first.id).status is Status.RUNNING)
            shown = store.get(second.id)
            assert shown.status is Status.QUEUED
            assert shown.eta_basis is not None
            assert shown.eta_basis.endswith("; resource guard limit 1")
            store.cancel(first.id)
            await until_async(lambda: store.get(second.id).status is Status.SUCCEEDED)

    asyncio.run(scenario())


def test_a_cancel_that_arrives_while_the_process_is_being_spawned_is_not_lost(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a node whose spawn of the command is held back,
    import slotline.node.launch

    real_spawn = slotline.node.launch.spawn
    gate = asyncio.Event()

    async def slow_spawn(*args: object, **kwargs: object) -> object:
        await gate.wait()
        return await real_spawn(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(slotline.node.launch, "spawn", slow_spawn)
    agent = submit(store, "sleep", "30")

    async def scenario() -> None:
        async with running_node(store, tmp_path) as node:
            await until_async(lambda: store.get(agent.id).status is Status.RUNNING)
            # when the task is cancelled before its process exists,
            store.cancel(agent.id)
            # (the node has taken the request while the spawn is still held back)
            await until_async(lambda: any(r.stop_reason for r in node.supervisor.runs.values()))
            gate.set()
            # then the process, once started, is stopped and the task ends cancelled.
            await until_async(lambda: store.get(agent.id).status is Status.CANCELLED)

    asyncio.run(scenario())


def test_a_node_stops_a_run_that_another_node_reaped(store: Store, tmp_path: Path) -> None:
    # Given a node that was taken for dead while its agent ran,
    agent = submit(store, "sleep", "30")

    async def scenario() -> None:
        async with running_node(store, tmp_path, heartbeat=0.1):
            await until_async(lambda: has_pid(store, agent.id))
            attempt = store.get(agent.id).attempts[0]
            assert attempt.pid is not None
            # when another node finishes its attempt as interrupted,
            store.finish(attempt.id, attempt.token, None, "interrupted: reaped elsewhere")
            # then this node stops the process: the task never runs twice at once.
            await until_async(lambda: process_start_time(attempt.pid) is None)  # type: ignore[arg-type]

    asyncio.run(scenario())
    assert store.get(agent.id).status is Status.FAILED


def test_a_second_live_node_with_the_same_id_is_refused(store: Store, tmp_path: Path) -> None:
    other = subprocess.Popen(
        [sys.executable, "-m", "slotline", "--store", store.url.removeprefix("sqlite://"),
         "serve", "--no-http", "--node-id", "twin"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        until(lambda: store.node("twin"), what="the other node registered")
        with pytest.raises(InvalidInput, match="another node named 'twin' is running"):
            asyncio.run(Node(store, node_id="twin", log_dir=tmp_path / "l").run_until_idle(10))
    finally:
        other.terminate()
        other.wait(timeout=30)


def test_the_node_rides_out_store_failures(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a store that fails a claim, then twice the commit of the task's outcome (the
    # node commits outcomes with its next claim), as a busy database would,
    failures = {"claim": 1, "finish": 2}
    real = store.claim

    def flaky(*args: object, **kw: Any) -> Any:
        verb = "finish" if kw.get("finished") else "claim"
        if failures[verb] > 0:
            failures[verb] -= 1
            raise StoreError(f"{verb} failed: database is locked")
        return real(*args, **kw)

    monkeypatch.setattr(store, "claim", flaky)
    task = submit(store, "true")
    # when the node runs, then the task still ends, recorded once.
    asyncio.run(Node(store, log_dir=tmp_path / "logs").run_until_idle(timeout=30))
    assert store.get(task.id).status is Status.SUCCEEDED
    assert failures == {"claim": 0, "finish": 0}
    assert [e.kind for e in store.task_events(task.id)].count("succeeded") == 1


def test_a_timed_out_sync_callable_keeps_its_slot_until_it_returns(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    release = threading.Event()
    began: list[float] = []
    ended: list[float] = []
    claims = claim_ends(store, monkeypatch)

    def stubborn() -> None:
        began.append(time.monotonic())
        release.wait(30)
        ended.append(time.time())

    store.set_setting("max_concurrent", 1)
    slow = store.submit({"callable": "stubborn", "timeout": 0.2})
    nxt = store.submit({"callable": "stubborn"})

    async def scenario() -> None:
        # (a heartbeat of 0.05 s: the node looks at the queue that often)
        node = Node(
            store, log_dir=tmp_path / "logs", callables={"stubborn": stubborn}, heartbeat=0.05
        )
        stop = asyncio.Event()
        running = asyncio.create_task(node.run(stop))
        await until_async(lambda: began, what="the first call runs")
        # Its 0.2 s timeout ran out before this moment (it was armed before the call began);
        # three claims made after it leave the next task queued: the thread still runs.
        timed_out = began[0] + 0.2
        await until_async(
            lambda: sum(end > timed_out for end in claims) >= 3, what="claims after the timeout"
        )
        assert store.get(nxt.id).status is Status.QUEUED
        assert not ended
        release.set()
        await until_async(lambda: store.get(nxt.id).status is Status.SUCCEEDED)
        stop.set()
        await running

    asyncio.run(scenario())
    task = store.get(slow.id)
    assert task.failure_reason == "timed out after 0.2s"
    assert task.attempts[0].finished_at is not None
    assert task.attempts[0].finished_at >= ended[0]


def test_a_sync_callable_that_raises_fails_with_its_traceback_in_the_log(
    store: Store, tmp_path: Path
) -> None:
    def broken(n: int) -> None:
        raise ValueError(f"bad n {n}")

    task = store.submit({"callable": "broken", "args": {"n": 3}})
    node = Node(store, log_dir=tmp_path / "logs", callables={"broken": broken})
    asyncio.run(node.run_until_idle(timeout=30))

    failed = store.get(task.id)
    assert failed.status is Status.FAILED
    assert failed.failure_reason == "ValueError: bad n 3"
    log = Path(failed.attempts[-1].log_path or "").read_text()
    assert "Traceback" in log
    assert "ValueError: bad n 3" in log


def test_a_cancelled_sync_callable_holds_its_slot_until_it_returns(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    release = threading.Event()
    began: list[float] = []
    claims = claim_ends(store, monkeypatch)

    def stubborn() -> None:
        began.append(time.monotonic())
        release.wait(30)

    store.set_setting("max_concurrent", 1)
    first = store.submit({"callable": "stubborn"})
    nxt = store.submit({"callable": "stubborn"})

    async def scenario() -> None:
        async with running_node(store, tmp_path, callables={"stubborn": stubborn}, heartbeat=0.05):
            await until_async(lambda: began, what="the first call runs")
            store.cancel(first.id)
            cancelled_at = time.monotonic()
            # Claims after the cancel leave the next task queued: the thread still runs.
            await until_async(
                lambda: sum(end > cancelled_at for end in claims) >= 3,
                what="claims after the cancel",
            )
            assert store.get(nxt.id).status is Status.QUEUED
            assert store.get(first.id).status is Status.RUNNING
            release.set()
            await until_async(lambda: store.get(nxt.id).status is Status.SUCCEEDED)

    asyncio.run(scenario())
    assert store.get(first.id).status is Status.CANCELLED


def test_a_node_that_stops_records_its_sync_callables_as_interrupted(
    store: Store, tmp_path: Path
) -> None:
    import threading

    release = threading.Event()
    began = threading.Event()

    def stubborn() -> None:
        began.set()
        release.wait(30)

    task = store.submit({"callable": "stubborn", "max_attempts": 1})

    async def scenario() -> None:
        node = Node(store, log_dir=tmp_path / "logs", callables={"stubborn": stubborn})
        stop = asyncio.Event()
        running = asyncio.create_task(node.run(stop))
        await until_async(began.is_set, what="the call runs")
        stop.set()
        # The node waits for the thread (it cannot be interrupted), then records the end.
        await until_async(lambda: node.supervisor.stopping, what="the node stops")
        assert not running.done()
        release.set()
        await asyncio.wait_for(running, 30)

    asyncio.run(scenario())
    ended = store.get(task.id)
    assert ended.status is Status.FAILED
    assert ended.failure_reason == "interrupted: the node stopped"


def test_each_node_has_its_own_guard_verdict(store: Store, tmp_path: Path) -> None:
    # Given two nodes on one store, one whose machine stays pressed,
    def guard(readings: dict[str, float]) -> Guard:
        sample = lambda: Sample(cpu_percent=readings["cpu"], available_mb=10_000)  # noqa: E731
        return Guard(Admission(max_cpu_percent=90), sampler=sample)

    pressed, other = {"cpu": 99.0}, {"cpu": 95.0}

    async def scenario() -> None:
        async with (
            running_node(store, tmp_path, node_id="a", guard=guard(pressed)) as a,
            running_node(store, tmp_path, node_id="b", guard=guard(other)) as b,
        ):
            a.duties.guard_interval = b.duties.guard_interval = 0.05
            # both verdicts are shown by node,
            both = "a: CPU at 99% (limit 90%); b: CPU at 95% (limit 90%)"
            await until_async(lambda: store.status().admission == both)
            # and when the other machine calms down, the pressed one's verdict stays.
            other["cpu"] = 10.0
            await until_async(lambda: "b:" not in (store.status().admission or "b:"))
            assert store.status().admission == "CPU at 99% (limit 90%)"

    asyncio.run(scenario())


def test_a_node_runs_no_more_than_its_slots(store: Store, tmp_path: Path) -> None:
    # Given room for five under the global limit and a node with two slots,
    store.set_setting("max_concurrent", 5)
    tasks = [submit(store, "sleep", "0.2") for _ in range(5)]
    node = Node(store, log_dir=tmp_path / "logs", slots=2)
    # when it runs the queue,
    asyncio.run(node.run_until_idle(timeout=60))
    # then every task ran, never more than two at once.
    assert all(store.get(t.id).status is Status.SUCCEEDED for t in tasks)
    assert peak((a.started_at, a.finished_at) for a in store.attempts()) == 2


def test_the_heartbeat_outlives_an_error_that_is_not_the_stores(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a node running a command, beating every 0.05 s,
    task = submit(store, "sleep", "30")

    async def scenario() -> None:
        async with running_node(store, tmp_path, heartbeat=0.05) as node:
            await until_async(lambda: has_pid(store, task.id), what="the command runs")
            # when sampling its process fails once with an OSError (not a store error),
            failed_at: list[float] = []
            real = node.duties.sampler.sample

            def sample(*args: Any, **kwargs: Any) -> Any:
                if not failed_at:
                    failed_at.append(store.clock())
                    raise OSError(errno.EMFILE, "Too many open files")
                return real(*args, **kwargs)

            monkeypatch.setattr(node.duties.sampler, "sample", sample)
            await until_async(lambda: failed_at, what="the failing sample")
            # then the node goes on heartbeating (a node that stops is taken for dead),
            await until_async(
                lambda: float((store.node(node.node_id) or {})["heartbeat_at"]) > failed_at[0],
                timeout=10,
                what="a heartbeat after the failure",
            )
            store.cancel(task.id)
            await until_async(lambda: store.get(task.id).status is Status.CANCELLED)

    with caplog.at_level(logging.ERROR, logger="slotline.node.node"):
        asyncio.run(scenario())
    # and the failure is in the log, with its cause (the chores beside the heartbeat).
    assert "heartbeat chores failed" in caplog.text
    assert "Too many open files" in caplog.text


def test_a_node_with_every_slot_taken_reads_instead_of_claiming(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given room under the global limit, a node of one slot running a long task,
    store.set_setting("max_concurrent", 5)
    long = submit(store, "sleep", "30")
    claims = calls_started(store, "claim", monkeypatch)
    # When each read between claims began, and whether it saw a queue TTL.
    glances: list[tuple[float, bool]] = []
    real = store.between_claims

    def between_claims(node_id: str) -> Any:
        began = time.monotonic()
        result = real(node_id)
        glances.append((began, result.next_wake is not None))
        return result

    monkeypatch.setattr(store, "between_claims", between_claims)

    async def scenario() -> None:
        async with running_node(store, tmp_path, slots=1):
            await until_async(lambda: has_pid(store, long.id))
            # when a task with a short queue TTL joins the line, the node reads (its kill
            # requests, the next TTL) instead of claiming: it could start nothing;
            joined = time.monotonic()
            late = submit(store, "true", queue_ttl=1)
            first = await until_async(lambda: min((t for t, ttl in glances if ttl), default=0))
            assert not [at for at in claims if joined < at < first]
            # at the TTL it claims, full or not, and expires the task;
            await until_async(lambda: store.get(late.id).status is Status.EXPIRED)
            # a cancel reaches it through that read, and the freed slot is refilled.
            after = submit(store, "true")
            store.cancel(long.id)
            await until_async(lambda: store.get(after.id).status is Status.SUCCEEDED)

    asyncio.run(scenario())
    assert store.get(long.id).status is Status.CANCELLED
