"""The CLI through a server (`--url`): the same output as on the store, errors mapped to the
same lines and exit codes, live follows over the event stream, and API tokens."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from slotline.models import Status
from slotline.store import Store

from .conftest import LINE_TIMEOUT, Lines, Run, Start, ok


@pytest.fixture
def spawn_env(env: dict[str, str]) -> dict[str, str]:
    return env


def submit_command(run: Run, program: str, *args: str) -> str:
    """Submit `program` (through `args`, e.g. --url) and return the task's id."""
    task: dict[str, Any] = ok(run(*args, "--json", "submit", "--", program))
    return str(task["id"])


def submit(run: Run, *args: str) -> dict[str, Any]:
    task: dict[str, Any] = ok(run(*args, "--json", "submit", "--", "true"))
    return task


def test_reads_through_url_match_the_store(run: Run, serve_http: Start) -> None:
    # Given a paused server with a few tasks in line (nothing changes while we read)
    url = serve_http()
    remote = ("--url", url)
    assert ok(run(*remote, "--json", "pause")) == {"paused": True}
    first = submit(run, *remote)
    web = ("-p", "high", "-l", "team=web", "-t", "web", "--memory-mb", "64", "--", "true")
    ok(run(*remote, "--json", "submit", *web))
    ok(run(*remote, "--json", "limits", "--set", "agent[claude]=2"))
    # Then every read gives the same JSON through the server as from the store
    # ($SLOTLINE_STORE is set: --url wins over it).
    for command in (
        ("ls",),
        ("ls", "--status", "queued", "-n", "1"),
        ("show", first["id"][:6]),
        ("status",),
        ("events", "--since", "0"),
        ("limits",),
    ):
        through_server = ok(run(*remote, "--json", *command))
        assert through_server == ok(run("--json", *command)), command
    assert [t["title"] for t in ok(run(*remote, "--json", "ls"))] == ["true", "web"]
    # And the human output too, where it does not depend on the clock
    assert run(*remote, "limits").out == run("limits").out
    exported = ok(run(*remote, "export"))
    local = ok(run("export"))
    assert exported["store"] == url
    assert {k: v for k, v in exported.items() if k not in ("store", "exported_at")} == {
        k: v for k, v in local.items() if k not in ("store", "exported_at")
    }
    assert set(ok(run(*remote, "--json", "stats"))) == set(ok(run("--json", "stats")))


def stored(store: Store, task_id: str) -> Any:
    """The task as `slotline --store … --json show` prints it."""
    return json.loads(json.dumps(store.get(task_id).to_dict()))


def test_steering_through_url_prints_what_the_store_would(
    run: Run, serve_http: Start, store: Store
) -> None:
    remote = ("--url", serve_http())
    ok(run(*remote, "--json", "pause"))
    a, b, c = (submit(run, *remote)["id"] for _ in range(3))
    # Each verb's JSON is the task as it is now, exactly as the store shows it.
    for command in (
        ("move", c, "--to", "1"),
        ("priority", b, "urgent"),
        ("boost", a),
        ("hold", b),
        ("release", b),
        ("cancel", c),
        ("restart", c),
    ):
        changed = ok(run(*remote, "--json", *command))
        assert changed == stored(store, changed["id"]), command
    assert stored(store, a)["position"] == 1
    assert stored(store, b)["priority"] == "urgent"
    # The one-line human reports are the store's too.
    held, released = run(*remote, "hold", b).out, run(*remote, "release", b).out
    assert held == f"held {b[:8]}: it starts only after release\n"
    assert released.startswith(f"released {b[:8]}: ")
    assert (run("hold", b).out, run("release", b).out) == (held, released)
    # A bumped task starts at once, even paused: its JSON has the store's shape.
    bumped = ok(run(*remote, "--json", "bump", a))
    assert set(bumped) == set(stored(store, a))
    assert ok(run(*remote, "--json", "resume")) == {"paused": False}
    assert store.status().paused is False


def test_errors_through_url_are_the_same_lines_and_exit_codes(run: Run, serve_http: Start) -> None:
    remote = ("--url", serve_http("--max-concurrent", "0"))
    task = submit(run, *remote)
    assert run(*remote, "cancel", task["id"]).code == 0
    for command in (
        ("show", "0000"),  # NotFound
        ("hold", task["id"]),  # InvalidTransition: it is cancelled
        ("submit", "--after", "abcdef", "--", "true"),  # UnknownDependency (InvalidInput)
        ("submit", "--env", "1X=2", "--", "true"),  # InvalidInput, from the spec check
    ):
        through_server, local = run(*remote, *command), run(*command)
        assert (through_server.code, through_server.err) == (local.code, local.err), command
        assert through_server.code == 1
        assert through_server.error_line().startswith("error: ")
    json_error = run(*remote, "--json", "hold", task["id"])
    assert json_error.err == run("--json", "hold", task["id"]).err
    assert '"type": "InvalidTransition"' in json_error.err


def test_events_follow_through_url_receives_a_live_event(
    run: Run, serve_http: Start, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    remote = ("--url", serve_http("--max-concurrent", "0"))
    before = submit(run, *remote)
    follower = spawn(*remote, "--json", "events", "--follow", "-n", "1")
    lines = Lines(follower.stdout)
    assert before["id"] in lines.next()  # it is up, with the latest event
    # When a task is submitted meanwhile, the follower prints its event as it happens
    after = submit(run, *remote)
    live = lines.until(lambda line: after["id"] in line)
    assert '"kind": "submitted"' in live
    follower.send_signal(signal.SIGINT)
    assert follower.wait(LINE_TIMEOUT) == 0


def test_submit_wait_and_logs_through_url(run: Run, serve_http: Start) -> None:
    remote = ("--url", serve_http())
    failed = run(*remote, "submit", "--wait", "--", "sh", "-c", "echo working; exit 3")
    assert failed.code == 3
    assert failed.out.startswith("submitted ")
    assert failed.err.rstrip().endswith(": exit code 3")
    task_id = failed.out.split()[1].rstrip(":")
    # The log comes from the server's log route, and equals the file the store names.
    assert run(*remote, "logs", task_id).out == run("logs", task_id).out == "working\n"
    assert run(*remote, "logs", "--follow", task_id).out == "working\n"
    done = ok(run(*remote, "--json", "submit", "--wait", "--", "true"))
    assert done["status"] == "succeeded"
    assert done == ok(run("--json", "show", done["id"]))


def test_logs_of_a_command_that_failed_to_start_say_so_and_why(
    run: Run, serve_http: Start, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    # Given a node, and `logs -f` of a task whose program does not exist, begun while it
    # is still in line
    url = serve_http()
    remote = ("--url", url)
    ok(run(*remote, "--json", "pause"))
    task_id = submit_command(run, "no-such-program-27", *remote)
    following = spawn("logs", "-f", task_id)
    # When the node tries to start it
    ok(run(*remote, "--json", "resume"))
    # Then every way of reading its log says it failed to start, and why
    said = f"attempt 1 of task {task_id[:8]} failed to start: command not found: no-such-program-27"
    _, err = following.communicate(timeout=LINE_TIMEOUT)
    assert (following.returncode, err.splitlines()[-1]) == (1, f"error: {said}")
    for where in ((), remote):
        for follow in ((), ("-f",)):
            result = run(*where, "logs", *follow, task_id)
            assert (result.code, result.error_line()) == (1, f"error: {said}"), (where, follow)
    for query in ("", "?follow=true"):
        answer = httpx.get(f"{url}/api/tasks/{task_id}/log{query}", timeout=LINE_TIMEOUT)
        assert answer.status_code == 404
        assert answer.json()["detail"] == said


def test_logs_follow_through_url_streams_a_running_task_into_its_retry(
    run: Run,
    serve_http: Start,
    spawn: Callable[..., subprocess.Popen[str]],
    store: Store,
    tmp_path: Path,
) -> None:
    # Given a queued task that prints `one`, waits for the file `go`, prints `two`, and
    # fails its first attempt only (retried at once)
    remote = ("--url", serve_http())
    store.pause()
    gated = (
        "echo one; while [ ! -e go ]; do sleep 0.02; done; echo two; "
        "[ -e tried ] || { touch tried; exit 1; }"
    )
    spec = {"command": ["sh", "-c", gated], "workspace": str(tmp_path)}
    task_id = store.submit({**spec, "max_attempts": 2, "backoff": 0}).id
    follow = spawn(*remote, "logs", "-f", task_id)
    notes = Lines(follow.stderr)
    assert "to start (queued, position 1" in notes.next()
    # When it runs, its output arrives while it runs, then its retry's
    store.resume()
    out = Lines(follow.stdout)
    assert out.next() == "one\n"
    assert store.get(task_id).status is Status.RUNNING
    (tmp_path / "go").touch()
    assert [out.next(), out.next(), out.next()] == ["two\n", "one\n", "two\n"]
    assert notes.next() == f"--- task {task_id[:8]}: attempt 2 ---\n"
    assert follow.wait(LINE_TIMEOUT) == 0
    assert store.get(task_id).status is Status.SUCCEEDED


def test_viewer_token_reads_but_cannot_steer(
    run: Run, serve_http: Start, tokens_file: Path
) -> None:
    # Given a viewer and an admin token, created before the server starts
    viewer = ok(run("--json", "token", "create", "--role", "viewer", "--name", "eve"))
    admin = run("token", "create", "--role", "admin", "--name", "root")
    assert admin.code == 0
    admin_token = admin.out.strip()
    assert viewer["name"] == "eve"
    assert viewer["role"] == "viewer"
    assert viewer["token"].startswith("slt_")
    stored = tokens_file.read_text()
    assert viewer["token"] not in stored
    assert admin_token not in stored
    listed = ok(run("--json", "token", "ls"))
    assert [(t["name"], t["role"]) for t in listed] == [("eve", "viewer"), ("root", "admin")]
    assert "token" not in listed[0]
    url = serve_http("--max-concurrent", "0")
    as_viewer = ("--url", url, "--token", viewer["token"])
    task = submit(run, "--url", url, "--token", admin_token)
    # Then the viewer reads, but its cancel is refused in one line, exit 1
    assert ok(run(*as_viewer, "--json", "show", task["id"]))["status"] == "queued"
    refused = run(*as_viewer, "cancel", task["id"])
    assert refused.code == 1
    assert refused.error_line() == (
        "error: token refused: token 'eve' is a viewer: it can read, not change"
    )
    # And no token at all is refused, saying how to give one
    anonymous = run("--url", url, "ls")
    assert anonymous.code == 1
    assert anonymous.error_line().startswith("error: token refused: ")
    assert "--token or $SLOTLINE_TOKEN" in anonymous.err
    as_admin = run("--url", url, "cancel", task["id"], env={"SLOTLINE_TOKEN": admin_token})
    assert as_admin.out == f"cancelled {task['id'][:8]}\n"
    # A revoked token is refused at once.
    assert run("token", "revoke", "eve").out == "revoked token 'eve'\n"
    assert run(*as_viewer, "ls").error_line().startswith("error: token refused: ")
    assert run("token", "revoke", "eve").code == 1


def test_token_create_refuses_a_taken_name_and_an_unknown_role(run: Run) -> None:
    assert run("token", "ls").out.startswith("no tokens in ")
    assert run("token", "create", "--role", "user", "--name", "ann").code == 0
    taken = run("token", "create", "--role", "admin", "--name", "ann")
    assert taken.code == 1
    assert "a token named 'ann' exists" in taken.error_line()
    assert run("token", "create", "--role", "boss", "--name", "bob").code == 2


def test_token_roles_are_the_servers() -> None:
    from slotline.cli.tokens import ROLES
    from slotline.server.auth import ROLES as SERVER_ROLES

    assert ROLES == SERVER_ROLES


def test_url_usage_errors_and_an_unreachable_server(run: Run, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{probe.getsockname()[1]}"
    unreachable = run("--url", nowhere, "ls")
    assert unreachable.code == 1
    assert unreachable.error_line().startswith(
        f"error: cannot reach the slotline server at {nowhere}"
    )
    both = run("--store", str(tmp_path / "s.db"), "--url", nowhere, "ls")
    assert both.code == 2
    assert both.error_line().startswith("error: give --store or --url, not both")
    both_env = run("ls", env={"SLOTLINE_URL": nowhere})
    assert both_env.code == 2
    assert "SLOTLINE_STORE and SLOTLINE_URL are both set" in both_env.error_line()
    # A flag beats the other's environment variable.
    assert run("--store", str(tmp_path / "s.db"), "ls", env={"SLOTLINE_URL": nowhere}).code == 0
    serve = run("--url", nowhere, "serve")
    assert serve.code == 2
    assert "serve runs a node on a store" in serve.error_line()
    assert run("--token", "slt_x", "ls").code == 2


SUBMITTER = """
import os, subprocess, sys
print("url", os.environ.get("SLOTLINE_URL"), "store" if "SLOTLINE_STORE" in os.environ else "-")
print("token", os.environ.get("SLOTLINE_TOKEN", "")[:9])
sys.exit(subprocess.run([sys.executable, "-m", "slotline", "submit", "-t", "child", "--", "true"],
                        timeout=60).returncode)
"""


def test_a_task_run_by_serve_submits_through_its_api_with_a_task_token(
    run: Run, serve_http: Start
) -> None:
    admin = ok(run("--json", "token", "create", "--role", "admin", "--name", "root"))["token"]
    url = serve_http()
    remote = ("--url", url, "--token", admin)
    submitted = run(*remote, "--json", "submit", "--wait", "--", sys.executable, "-c", SUBMITTER)
    parent = submitted.json()
    assert parent["status"] == "succeeded", run(*remote, "logs", parent["id"]).out
    log = run(*remote, "logs", parent["id"]).out
    assert f"url {url} -" in log  # the API, not the store
    assert "token slt_task." in log
    children = ok(run(*remote, "--json", "ls"))
    child = next(t for t in children if t["title"] == "child")
    assert ok(run(*remote, "--json", "show", child["id"]))["parent_id"] == parent["id"]


AGENT_SUBMITTER = """
import subprocess, sys
sys.exit(subprocess.run([sys.executable, "-m", "slotline", "--json", "submit", "--agent", "echoer",
                         "--prompt", "from a run"], timeout=60).returncode)
"""


def test_the_server_fills_agent_types_for_user_tokens_and_runs(
    run: Run, serve_http: Start, tmp_path: Path
) -> None:
    # Given a server whose slotline.yaml has an agent type (raw commands are for admins),
    # and lets users run in its folder (the CLI submits its current folder)
    (tmp_path / "slotline.yaml").write_text(
        "agents:\n  echoer:\n    command: [echo, --, '{prompt}']\nusers:\n  workspaces: [.]\n"
    )
    admin = ok(run("--json", "token", "create", "--role", "admin", "--name", "root"))["token"]
    user = ok(run("--json", "token", "create", "--role", "user", "--name", "ann"))["token"]
    url = serve_http()
    # When a user submits by agent type, the server expands it: no raw command is sent
    as_user = ("--url", url, "--token", user, "--json")
    task = ok(run(*as_user, "submit", "--wait", "--agent", "echoer", "--prompt", "-n hi"))
    assert task["command"] == ["echo", "--", "-n hi"]
    assert task["status"] == "succeeded"
    # but not in a folder users may not choose: the server's one line, as it said it
    elsewhere = ("--url", url, "--token", user, "submit", "--workspace", "/etc")
    refused = run(*elsewhere, "--agent", "echoer", "--prompt", "x")
    assert refused.code == 1
    assert refused.error_line() == (
        "error: token refused: workspace /etc is not among the workspaces users may "
        f"choose (users.workspaces: {tmp_path})"
    )
    # And a run, whose working directory (its workspace) has no slotline.yaml, does too
    workspace = tmp_path / "ws"
    workspace.mkdir()
    remote = ("--url", url, "--token", admin)
    parent = ok(
        run(
            *remote,
            "--json",
            "submit",
            "--wait",
            "--workspace",
            str(workspace),
            "--",
            sys.executable,
            "-c",
            AGENT_SUBMITTER,
        )
    )
    assert parent["status"] == "succeeded", run(*remote, "logs", parent["id"]).out
    child = next(t for t in ok(run(*remote, "--json", "ls")) if t["parent_id"] == parent["id"])
    assert child["command"] == ["echo", "--", "from a run"]
    assert child["agent"] == "echoer"
