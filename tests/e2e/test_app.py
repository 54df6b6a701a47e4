"""Python functions as tasks through the real `slotline serve --app MODULE:APP` process:
declared in a module, submitted from another process, run under the limit, stopped by
timeouts and terminate, surviving a kill -9 of the node by policy, results read back."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from e2e.conftest import API_READY, Lines, Result, Run
from overlap import peak
from slotline.models import Status, Task
from slotline.store import Store
from waiting import until

APP = '''
import asyncio
import os
import time
from pathlib import Path

import slotline

app = slotline.App(os.environ["SLOTLINE_STORE"])


@app.task
def add(x: int, y: int = 1) -> int:
    print(f"adding {x} and {y}")
    time.sleep(0.2)
    return x + y


@app.task(name="greet")
async def greet(name: str, *, punctuation: str = "!") -> dict[str, str]:
    await asyncio.sleep(0.2)
    return {"greeting": f"hello {name}{punctuation}"}


@app.task
def boom(value: int) -> None:
    raise ValueError(f"bad input {value}")


@app.task
def opaque() -> object:
    return object()


@app.task
def spin(pid_file: str) -> None:
    """Busy forever, after saying where it runs."""
    Path(pid_file + ".tmp").write_text(str(os.getpid()))
    os.replace(pid_file + ".tmp", pid_file)
    while True:
        pass


@app.task
def environment(*names: str) -> dict[str, str | None]:
    return {name: os.environ.get(name) for name in names}


@app.task(max_attempts=2, backoff=0.01)
def until_file(pid_file: str, go: str) -> str:
    Path(pid_file + ".tmp").write_text(str(os.getpid()))
    os.replace(pid_file + ".tmp", pid_file)
    while not os.path.exists(go):
        time.sleep(0.02)
    return "went"
'''


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    (tmp_path / "agents.py").write_text(APP)
    return tmp_path


Node = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def node(base_env: dict[str, str], app_dir: Path) -> Iterator[Node]:
    """`slotline serve --no-http --app agents:app …`, stopped (SIGTERM) at the test's end
    unless the test killed it."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "slotline", "serve", "--no-http", "--node-id", "apps",
             "--app", "agents:app", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**base_env, **(env or {})},
            cwd=app_dir,
        )  # fmt: skip
        assert proc.stdout is not None
        assert "Python function" in proc.stdout.readline()  # it is up
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
        else:
            proc.communicate()


def python(base_env: dict[str, str], app_dir: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run a Python script in the app's folder (another process than the node's)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=base_env,
        cwd=app_dir,
        timeout=240,
        check=False,
    )


def ended(store: Store, task_id: str) -> Task | None:
    task = store.get(task_id, estimate=False)
    return task if task.status.terminal else None


def pid_in(path: Path) -> int | None:
    return int(path.read_text()) if path.exists() else None


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_sync_and_async_functions_submitted_from_another_process_run_under_the_limit(
    node: Node, store: Store, base_env: dict[str, str], app_dir: Path
) -> None:
    # Given a node serving the app at limit 2,
    node("--max-concurrent", "2")
    # when another process submits sync and async functions and waits for their results,
    script = python(
        base_env,
        app_dir,
        """
        import json
        from agents import add, greet
        tasks = [add.submit(i, y=10) for i in range(4)]
        tasks += [greet.options(priority="high").submit(f"n{i}", punctuation="?")
                  for i in range(4)]
        print(json.dumps({"ids": [t.id for t in tasks],
                          "results": [t.result(timeout=180) for t in tasks]}))
        """,
    )
    # then each result comes back as the function returned it (JSON),
    assert script.returncode == 0, script.stderr
    answer = json.loads(script.stdout)
    assert answer["results"] == [10, 11, 12, 13] + [{"greeting": f"hello n{i}?"} for i in range(4)]
    # and no more than two ran at once.
    tasks = [store.get(task_id) for task_id in answer["ids"]]
    assert all(t.status is Status.SUCCEEDED for t in tasks)
    assert peak((t.started_at or 0, t.finished_at or 0) for t in tasks) <= 2
    # The output of a sync function is its log.
    log = Path(tasks[1].attempts[-1].log_path or "")
    assert "adding 1 and 10" in log.read_text()


def test_an_exception_fails_the_attempt_with_its_type_and_message(
    node: Node, store: Store, base_env: dict[str, str], app_dir: Path, cli: Run
) -> None:
    node()
    script = python(
        base_env,
        app_dir,
        """
        import json, slotline
        from agents import boom, opaque
        failing, odd = boom.submit(42), opaque.submit()
        for task in (failing, odd):
            try:
                task.result(timeout=120)
            except slotline.TaskFailed as exc:
                print(exc)
        print(json.dumps([failing.id, odd.id]))
        """,
    )
    assert script.returncode == 0, script.stderr
    *messages, ids = script.stdout.splitlines()
    failing, odd = (store.get(i) for i in json.loads(ids))
    # The reason is the exception's type and message; the traceback is in the log.
    assert failing.failure_reason == "ValueError: bad input 42"
    assert "ValueError: bad input 42" in messages[0]
    log = Path(failing.attempts[-1].log_path or "").read_text()
    assert "Traceback" in log
    assert 'raise ValueError(f"bad input {value}")' in log
    # A result that is not JSON fails the attempt, saying so.
    assert odd.status is Status.FAILED
    assert (odd.failure_reason or "").startswith("TypeError: the function's result is not JSON")
    shown = cli("--json", "show", failing.id)
    assert shown.code == 0, shown.err
    assert shown.json()["failure_reason"] == "ValueError: bad input 42"


def test_a_stuck_sync_function_is_stopped_by_its_timeout_and_its_slot_frees(
    node: Node, store: Store, base_env: dict[str, str], app_dir: Path, tmp_path: Path
) -> None:
    # Given one slot, a function that never returns (with a timeout) and one behind it,
    node("--max-concurrent", "1")
    pid_file = tmp_path / "spin.pid"
    script = python(
        base_env,
        app_dir,
        f"""
        import json
        from agents import add, spin
        stuck = spin.options(timeout=1).submit({str(pid_file)!r})
        after = add.submit(1)
        print(json.dumps([stuck.id, after.id, after.result(timeout=120)]))
        """,
    )
    # then the timeout stops it, its process is gone, and the next one runs.
    assert script.returncode == 0, script.stderr
    stuck_id, after_id, value = json.loads(script.stdout)
    assert value == 2
    stuck = store.get(stuck_id)
    assert stuck.status is Status.FAILED
    assert stuck.failure_reason == "timed out after 1s"
    pid = pid_in(pid_file)
    assert pid is not None
    until(lambda: gone(pid), what="the stuck worker is gone")
    after = store.get(after_id)
    assert after.started_at is not None
    assert stuck.finished_at is not None
    assert after.started_at >= stuck.finished_at


def test_terminate_stops_a_stuck_sync_function_and_frees_its_slot(
    node: Node, store: Store, cli: Run, tmp_path: Path, app_dir: Path, base_env: dict[str, str]
) -> None:
    node("--max-concurrent", "1")
    pid_file = tmp_path / "spin.pid"
    script = python(
        base_env,
        app_dir,
        f"""
        import json
        from agents import add, spin
        print(json.dumps([spin.submit({str(pid_file)!r}).id, add.submit(5).id]))
        """,
    )
    assert script.returncode == 0, script.stderr
    stuck_id, after_id = json.loads(script.stdout)
    # Once it runs (its worker said where),
    pid = until(lambda: pid_in(pid_file), what="the function runs")
    assert store.get(after_id).status is Status.QUEUED
    # and the node samples its worker's CPU and memory as it does a command's,
    until(lambda: store.get(stuck_id).attempts[-1].rss_bytes, what="a usage sample")
    assert store.get(stuck_id).attempts[-1].pid is None  # never re-adopted by a pid
    # terminate stops it at once and the slot goes to the next task.
    result: Result = cli("terminate", stuck_id, "--reason", "stuck")
    assert result.code == 0, result.err
    stuck = until(lambda: ended(store, stuck_id), 60, "the terminated task ends")
    assert stuck.status is Status.FAILED
    assert stuck.failure_reason == "terminated: stuck"
    assert gone(pid)
    after = until(lambda: ended(store, after_id), 60, "the next task ends")
    assert after.status is Status.SUCCEEDED
    assert after.result == 6


def test_kill_9_of_the_node_fails_or_retries_function_runs_by_policy_and_loses_none(
    node: Node, store: Store, tmp_path: Path, app_dir: Path, base_env: dict[str, str]
) -> None:
    # Given two function runs in progress: one with a single attempt, one with two,
    proc = node("--max-concurrent", "2")
    once, twice, go = tmp_path / "once.pid", tmp_path / "twice.pid", tmp_path / "go"
    script = python(
        base_env,
        app_dir,
        f"""
        import json
        from agents import until_file
        once = until_file.options(max_attempts=1).submit({str(once)!r}, {str(go)!r})
        twice = until_file.submit({str(twice)!r}, {str(go)!r})
        print(json.dumps([once.id, twice.id]))
        """,
    )
    assert script.returncode == 0, script.stderr
    once_id, twice_id = json.loads(script.stdout)
    pids = [until(lambda p=p: pid_in(p), what="both functions run") for p in (once, twice)]
    once.unlink()
    twice.unlink()
    # when the node is killed outright,
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    # its function runs stop with it (nothing could collect their results),
    for pid in pids:
        until(lambda pid=pid: gone(pid), 60, "the node's function runs are gone")
    # and the next node ends the single attempt as interrupted and retries the other.
    node()
    failed = until(lambda: ended(store, once_id), 60, "the single attempt ends")
    assert failed.status is Status.FAILED
    assert (failed.failure_reason or "").startswith("interrupted")
    until(lambda: pid_in(twice), what="the second attempt runs")
    go.touch()
    retried = until(lambda: ended(store, twice_id), 60, "the retried task ends")
    assert retried.status is Status.SUCCEEDED
    assert retried.result == "went"
    assert [a.outcome for a in retried.attempts] == ["failed", "succeeded"]
    assert store.counts() == {"failed": 1, "succeeded": 1}


def test_a_function_no_live_node_serves_says_so_until_one_does(
    node: Node, store: Store, cli: Run, base_env: dict[str, str], app_dir: Path
) -> None:
    # Given no node, a submit warns and the task says why it waits,
    script = python(
        base_env,
        app_dir,
        """
        import warnings
        from agents import add
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            task = add.submit(20, y=22)
        print(task.id)
        print(f"{said[0].category.__name__}: {said[0].message}")
        """,
    )
    assert script.returncode == 0, script.stderr
    task_id, warning = script.stdout.splitlines()
    assert warning.startswith("UnservedWarning: no live node serves function 'agents.add'")
    reason = "no live node serves function 'agents.add'"
    shown = cli("--json", "show", task_id)
    assert shown.code == 0, shown.err
    assert shown.json()["status_reason"].startswith(reason)
    status = cli("--json", "status")
    assert status.json()["queued"][0]["status_reason"].startswith(reason)
    text = cli("status")
    assert reason in " ".join(text.out.split())
    # when a node serving it starts, it runs, and `show` has its result.
    node()
    done = until(lambda: ended(store, task_id), 60, "the task ends")
    assert done.status is Status.SUCCEEDED
    shown = cli("--json", "show", task_id)
    assert shown.json()["result"] == 42
    assert shown.json()["status_reason"] is None
    assert "42" in cli("show", task_id).out


def test_serve_refuses_an_app_it_cannot_load(cli: Run, app_dir: Path) -> None:
    for reference, expected in [
        ("nosuch:app", "cannot import nosuch"),
        ("agents:missing", "agents:missing is not a slotline.App"),
        ("agents", "MODULE:ATTRIBUTE"),
    ]:
        result = cli("serve", "--no-http", "--app", reference, cwd=app_dir)
        assert result.code == 2, result.err
        assert expected in result.err


@pytest.fixture
def http_env(base_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    return {**base_env, "SLOTLINE_TOKENS": str(tmp_path / "tokens.json")}


def serving_http(env: dict[str, str], cwd: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`slotline serve --port 0` on 127.0.0.1; its process and URL once it is ready."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "slotline", "serve", "--port", "0", "--node-id", "web", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    ready = Lines(proc.stdout).until(lambda line: line.startswith(API_READY))
    return proc, ready[len(API_READY) :].split()[0]


def stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_the_http_api_shows_why_a_function_waits_and_then_its_result(
    store: Store, http_env: dict[str, str], app_dir: Path
) -> None:
    # Given a function task and a node that does not serve it,
    task = store.submit({"callable": "agents.add", "args": {"x": 1, "y": 2}})
    proc, url = serving_http(http_env, app_dir)
    try:
        body = httpx.get(f"{url}/api/tasks/{task.id}").json()
        status = httpx.get(f"{url}/api/status").json()
    finally:
        stop(proc)
    # the API says why it waits;
    reason = "no live node serves function 'agents.add'"
    assert body["status"] == "queued"
    assert body["status_reason"].startswith(reason)
    assert status["queued"][0]["status_reason"].startswith(reason)
    # a node that serves it runs it, and the API has its result.
    proc, url = serving_http(http_env, app_dir, "--app", "agents:app")
    try:
        until(lambda: ended(store, task.id), 60, "the task ends")
        body = httpx.get(f"{url}/api/tasks/{task.id}").json()
    finally:
        stop(proc)
    assert body["status"] == "succeeded"
    assert body["result"] == 3


def test_a_function_runs_with_the_task_environment_and_the_allowed_variables(
    node: Node, store: Store, base_env: dict[str, str], app_dir: Path
) -> None:
    # Given a node that passes on SAUCE (--env-allow, which replaces $SLOTLINE_ENV_ALLOW),
    secrets = {"SAUCE": "tomato", "PEPPER": "black", "SALT": "sea"}
    node("--env-allow", "SAUCE", env={**secrets, "SLOTLINE_ENV_ALLOW": "PEPPER"})
    script = python(
        base_env,
        app_dir,
        """
        import json
        from agents import environment
        task = environment.submit("SAUCE", "PEPPER", "SALT", "SLOTLINE_TASK_ID")
        print(json.dumps([task.id, task.result(timeout=120)]))
        """,
    )
    assert script.returncode == 0, script.stderr
    task_id, seen = json.loads(script.stdout)
    # the worker process sees the flag's variable and its task id, not the others.
    assert seen == {"SAUCE": "tomato", "PEPPER": None, "SALT": None, "SLOTLINE_TASK_ID": task_id}
