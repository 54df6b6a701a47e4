"""Following live against a real `slotline serve`: `submit --wait`, `logs -f`, `events -f`."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import IO

from slotline.models import Status
from slotline.store import Store

from .conftest import Run, Serve, Spawn

# A command that prints `one`, waits until the test creates the file `go`, prints `two`.
GATED = ["sh", "-c", "echo one; while [ ! -e go ]; do sleep 0.02; done; echo two"]


def line_of(stream: IO[str] | None) -> str:
    assert stream is not None
    return stream.readline()


def test_submit_wait_exits_with_the_exit_code_of_the_task(cli: Run, serve: Serve) -> None:
    serve()
    failed = cli("submit", "--wait", "--", "sh", "-c", "echo working; exit 3")
    assert failed.code == 3
    assert failed.out.startswith("submitted ")
    assert "failed after" in failed.err
    assert failed.err.rstrip().endswith(": exit code 3")

    done = cli("--json", "submit", "--wait", "--", "sh", "-c", "exit 0")
    assert done.code == 0
    task = done.json()  # only the task as it ended: one JSON document
    assert (task["status"], task["exit_code"]) == ("succeeded", 0)
    assert done.err == ""


def test_submit_wait_on_a_task_cancelled_meanwhile_exits_1_saying_why(
    store: Store, serve: Serve, spawn: Spawn
) -> None:
    serve()
    waiting = spawn("submit", "--wait", "--", "sleep", "600")
    announced = line_of(waiting.stdout)
    task_id = announced.split()[1].rstrip(":")
    # Off a terminal, the status line is a line per change of state after the one the
    # announcement gave (on a busy machine the node may have claimed it by then).
    states = [announced.split(": ", 1)[1]]
    while states[-1] != "running\n" and len(states) < 5:
        assert states[-1].startswith("queued"), states
        states.append(line_of(waiting.stderr).removeprefix(f"{task_id}: "))
    assert states[-1] == "running\n", states

    store.cancel(task_id)
    _, err = waiting.communicate(timeout=30)

    assert waiting.returncode == 1
    assert err.rstrip().splitlines()[-1].startswith(f"task {task_id} cancelled")


def test_ctrl_c_stops_waiting_but_not_the_task(store: Store, spawn: Spawn) -> None:
    waiting = spawn("submit", "--hold", "--wait", "--", "true")
    task_id = line_of(waiting.stdout).split()[1].rstrip(":")
    assert task_id
    waiting.send_signal(signal.SIGINT)
    _, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 130
    assert f"stopped waiting; task {task_id} is held" in err
    assert "Traceback" not in err
    assert store.get(task_id).status is Status.HELD


def test_logs_follow_waits_for_the_start_prints_live_and_ends_with_the_task(
    cli: Run, store: Store, serve: Serve, spawn: Spawn, tmp_path: Path
) -> None:
    serve()
    store.pause()
    task_id = store.submit({"command": GATED, "workspace": str(tmp_path)}).id
    follow = spawn("logs", "-f", task_id)
    assert "to start (queued, position 1" in line_of(follow.stderr)

    store.resume()
    assert line_of(follow.stdout) == "one\n"  # printed while the task still runs
    assert store.get(task_id).status is Status.RUNNING
    (tmp_path / "go").touch()
    out, err = follow.communicate(timeout=30)

    assert follow.returncode == 0, err
    assert out == "two\n"
    assert store.get(task_id).status is Status.SUCCEEDED
    assert cli("logs", task_id).out == "one\ntwo\n"


def test_events_follow_since_resumes_after_that_seq(store: Store, spawn: Spawn) -> None:
    first = store.submit({"command": ["true"]}).id
    second = store.submit({"command": ["true"]}).id
    seq = store.events()[-2].seq  # the first submit (the fixture changed a setting before)
    follow = spawn("--json", "events", "-f", "--since", str(seq))
    assert json.loads(line_of(follow.stdout))["task_id"] == second
    store.cancel(first)
    event = json.loads(line_of(follow.stdout))
    assert (event["kind"], event["task_id"]) == ("cancelled", first)
    follow.send_signal(signal.SIGINT)
    follow.communicate(timeout=30)
    assert follow.returncode == 0
