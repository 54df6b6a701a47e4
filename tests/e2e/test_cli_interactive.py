"""Interactive runs through the CLI and a real node: tmux is the terminal.

A test agent (`tests/asking_agent.py`) asks a yes/no question on its terminal and waits.
The tests answer it with `slotline send`, and with `slotline attach` run in a terminal
of the test's own (a pane of a second, private tmux server: a real PTY, keys typed by
`send-keys`), terminate it, kill the node with SIGKILL under two of them, and churn
attaches at a limit. Every tmux server is killed at the end of its test.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from slotline.runner.tmux import Terminal, socket_path
from waiting import until

from .conftest import Result, Run, Serve, Start, ok

AGENT = str(Path(__file__).resolve().parents[1] / "asking_agent.py")
ASK = ["--interactive", "--", sys.executable, AGENT]

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None and not os.environ.get("CI"),
    reason="tmux is not installed (.ci/run installs it)",
)


@pytest.fixture(autouse=True)
def node_tmux(tmp_path: Path) -> Iterator[str]:
    """The node's own tmux server (its socket beside the store's logs), killed at the end
    so that a failed test leaves no run behind."""
    socket = socket_path(tmp_path / "logs")
    yield socket
    subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def outer(tmp_path: Path, base_env: dict[str, str]) -> Iterator[Callable[..., str]]:
    """A terminal of the test's own: tmux commands on a second private server (a user's
    tmux, in which `slotline attach` runs as in any terminal)."""
    socket = str(tmp_path / "outer.sock")
    env = {k: v for k, v in base_env.items() if k not in ("COLUMNS", "LINES")}

    def run(*args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", socket, "-f", os.devnull, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=True,
        )
        return done.stdout

    # A session that stays: the server lives on between the test's own sessions (one
    # that lost its last session exits, and a new session could reach it while it does).
    run("new-session", "-d", "-s", "base", "sleep 600")
    yield run
    subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, check=False)


def screen_of(outer: Callable[..., str], name: str) -> str:
    try:
        return outer("capture-pane", "-p", "-t", f"={name}:")
    except subprocess.CalledProcessError:
        return ""


def start_attach(outer: Callable[..., str], tmp_path: Path, name: str, *args: str) -> None:
    """Run `slotline attach ARGS` in a new window of the test's terminal; once it exits,
    the window says how (`attach exited N`) and stays."""
    command = shlex.join([sys.executable, "-m", "slotline", "attach", *args])
    shell = f'cd {shlex.quote(str(tmp_path))} && {command}; echo "attach exited $?"; exec sleep 600'
    outer("new-session", "-d", "-s", name, "-x", "120", "-y", "30", shell)


def task_of(cli: Run, task_id: str) -> dict[str, Any]:
    found: dict[str, Any] = ok(cli("--json", "show", task_id))
    return found


def running(cli: Run, task_id: str) -> dict[str, Any] | None:
    task = task_of(cli, task_id)
    return task if task["status"] == "running" and task["attempts"][-1]["pid"] else None


def asks(cli: Run, task_id: str) -> bool:
    """Whether the run's terminal shows the agent's question."""
    task = task_of(cli, task_id)
    if task["status"] != "running" or not task["attempts"]:
        return False
    terminal = Terminal.of(task["attempts"][-1]["log_path"])
    return terminal is not None and "Proceed?" in _screen(terminal)


def _screen(terminal: Terminal) -> str:
    try:
        return terminal.screen()
    except Exception:
        return ""


def ended(cli: Run, task_id: str) -> dict[str, Any] | None:
    task = task_of(cli, task_id)
    return task if task["status"] in ("succeeded", "failed", "cancelled") else None


def submit_asking(cli: Run, *args: str) -> str:
    task_id: str = ok(cli("--json", "submit", *args, *ASK))["id"]
    return task_id


def test_send_answers_the_question_and_logs_show_it_as_text(cli: Run, serve: Serve) -> None:
    serve()
    task_id = submit_asking(cli)
    until(lambda: asks(cli, task_id), what="the question on the run's terminal")

    sent = cli("send", task_id, "yes")
    assert sent.code == 0, sent.err
    assert sent.out.strip() == f"typed into {task_id[:8]}: 3 characters, then Enter"

    task = until(lambda: ended(cli, task_id), what="the run's end")
    assert task["status"] == "succeeded"
    assert task["interactive"] is True
    assert task["attempts"][-1]["exit_code"] == 0
    logs = cli("logs", task_id)
    assert "Proceed? [y/n] yes\nasking_agent got 'yes'\n" in logs.out
    assert "\r" not in logs.out  # the terminal's CR LF, as plain LF
    log = Path(task["attempts"][-1]["log_path"]).read_bytes()
    assert b"asking_agent got 'yes'\r\n" in log  # as the terminal was sent it

    # Its terminal is gone with it; a headless task has none.
    gone = cli("send", task_id, "again")
    assert gone.code == 1
    assert f"task {task_id[:8]} has ended (succeeded): its terminal is gone" in gone.err
    headless = ok(cli("--json", "submit", "--", "true"))["id"]
    refused = cli("send", headless, "y")
    assert refused.code == 1
    assert f"task {headless[:8]} is not interactive" in refused.err


def test_an_answer_no_fails_the_run_with_its_exit_code(cli: Run, serve: Serve) -> None:
    serve()
    task_id = submit_asking(cli)
    until(lambda: asks(cli, task_id), what="the question")
    assert cli("send", task_id, "no").code == 0
    task = until(lambda: ended(cli, task_id), what="the run's end")
    assert task["status"] == "failed"
    assert task["attempts"][-1]["exit_code"] == 3


def test_attach_waits_for_a_queued_run_then_types_into_it(
    cli: Run, serve: Serve, outer: Callable[..., str], tmp_path: Path
) -> None:
    assert cli("limits", "--set", "max_concurrent=1").code == 0
    serve()
    first = submit_asking(cli, "--title", "first")
    second = submit_asking(cli, "--title", "second")
    until(lambda: asks(cli, first), what="the first run's question")

    # The second waits in line: attach says so, and attaches once it runs.
    start_attach(outer, tmp_path, "user", second)
    until(
        lambda: (
            f"waiting for {second[:8]} to start: queued, position 1" in screen_of(outer, "user")
        ),
        what="attach's wait line",
    )
    assert cli("send", first, "y").code == 0
    until(
        lambda: "Proceed?" in screen_of(outer, "user"), what="the second run's question, attached"
    )
    assert "[slotline " in screen_of(outer, "user")  # slotline's status bar, not the user's

    # Keys typed in the user's terminal reach the run.
    outer("send-keys", "-t", "=user:", "y", "Enter")
    task = until(lambda: ended(cli, second), what="the second run's end")
    assert task["status"] == "succeeded"
    screen = until(
        lambda: "attach exited 0" in screen_of(outer, "user") and screen_of(outer, "user")
    )
    assert f"task {second[:8]} succeeded" in screen


def test_detaching_leaves_the_run_going_and_read_only_cannot_type(
    cli: Run, serve: Serve, outer: Callable[..., str], tmp_path: Path
) -> None:
    serve()
    task_id = submit_asking(cli)
    until(lambda: asks(cli, task_id), what="the question")

    start_attach(outer, tmp_path, "watcher", "--read-only", task_id)
    until(lambda: "Proceed?" in screen_of(outer, "watcher"), what="the read-only view")
    outer("send-keys", "-t", "=watcher:", "y", "Enter")
    # Detach (C-b d): attach exits 0, saying the run goes on; it still waits, unanswered.
    outer("send-keys", "-t", "=watcher:", "C-b", "d")
    screen = until(
        lambda: "attach exited 0" in screen_of(outer, "watcher") and screen_of(outer, "watcher")
    )
    assert f"detached from {task_id[:8]}; it goes on" in screen
    task = task_of(cli, task_id)
    assert task["status"] == "running"
    assert "asking_agent got" not in cli("logs", task_id).out

    assert cli("send", task_id, "y").code == 0
    assert until(lambda: ended(cli, task_id))["status"] == "succeeded"


def test_attach_needs_a_terminal_and_an_interactive_task(cli: Run) -> None:
    headless = ok(cli("--json", "submit", "--", "true"))["id"]
    refused = cli("attach", headless)
    assert refused.code == 1
    assert "is not interactive" in refused.err
    interactive = submit_asking(cli)
    piped = cli("attach", interactive)
    assert piped.code == 2
    assert "attach needs a terminal" in piped.err


def test_terminate_stops_an_interactive_run(cli: Run, serve: Serve) -> None:
    serve()
    task_id = submit_asking(cli)
    until(lambda: asks(cli, task_id), what="the question")
    ok(cli("--json", "terminate", task_id))
    task = until(lambda: ended(cli, task_id), what="the run's end")
    assert task["status"] == "failed"
    assert "terminated" in task["failure_reason"]
    assert task["attempts"][-1]["exit_code"] == -signal.SIGTERM


def test_a_node_killed_with_sigkill_readopts_its_interactive_runs(
    cli: Run, base_env: dict[str, str], tmp_path: Path
) -> None:
    def start() -> subprocess.Popen[str]:
        node = subprocess.Popen(
            [sys.executable, "-m", "slotline", "serve", "--no-http", "--node-id", "n1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=base_env,
            cwd=tmp_path,
        )
        assert node.stdout is not None
        assert "max_concurrent" in node.stdout.readline()
        return node

    node = start()
    try:
        ids = [submit_asking(cli, "--title", name) for name in ("one", "two")]
        for task_id in ids:
            until(lambda task_id=task_id: asks(cli, task_id), what="each run's question")
        pids = [task_of(cli, task_id)["attempts"][-1]["pid"] for task_id in ids]

        node.send_signal(signal.SIGKILL)
        node.communicate(timeout=30)
        # The runs go on without their node, their terminals too.
        assert cli("send", ids[0], "y").code == 0
        until(
            lambda: (
                Path(task_of(cli, ids[0])["attempts"][-1]["log_path"]).with_suffix(".exit")
            ).exists()
        )

        node = start()
        first = until(lambda: ended(cli, ids[0]), what="the run that ended while no node ran")
        assert first["status"] == "succeeded"
        assert first["attempts"][-1]["exit_code"] == 0
        second = task_of(cli, ids[1])
        assert second["status"] == "running"
        assert second["attempts"][-1]["pid"] == pids[1]  # the same process, re-adopted
        events = ok(cli("--json", "events", "-n", "1000"))
        assert any(
            e["kind"] == "reconciled"
            and e["task_id"] == ids[1]
            and e["data"]["action"] == "adopted"
            for e in events
        )

        assert cli("send", ids[1], "no").code == 0
        second = until(lambda: ended(cli, ids[1]), what="the re-adopted run's end")
        assert second["status"] == "failed"
        assert second["attempts"][-1]["exit_code"] == 3
        assert "asking_agent got 'no'" in cli("logs", ids[1]).out
    finally:
        node.send_signal(signal.SIGTERM)
        node.communicate(timeout=30)


def test_the_limit_holds_while_people_attach_and_detach(
    cli: Run, serve: Serve, outer: Callable[..., str], tmp_path: Path
) -> None:
    assert cli("limits", "--set", "max_concurrent=2").code == 0
    serve()
    ids = [submit_asking(cli, "--title", f"run{n}") for n in range(3)]
    until(lambda: sum(bool(running(cli, t)) for t in ids) == 2, what="two runs")
    first, second = [t for t in ids if running(cli, t)]
    third = next(t for t in ids if t not in (first, second))

    for round_ in range(3):
        for task_id in (first, second):
            name = f"a{round_}{task_id[:4]}"
            start_attach(outer, tmp_path, name, task_id)
            until(lambda name=name: "Proceed?" in screen_of(outer, name), what="attached")
            status = ok(cli("--json", "status"))
            assert status["active"] == 2
            assert task_of(cli, third)["status"] == "queued"
            outer("send-keys", "-t", f"={name}:", "C-b", "d")
            until(lambda name=name: "attach exited 0" in screen_of(outer, name), what="detached")
            outer("kill-session", "-t", f"={name}:")
    # Answering one frees its slot: the third starts, never a fourth slot.
    assert cli("send", first, "y").code == 0
    until(lambda: running(cli, third), what="the third run")
    assert ok(cli("--json", "status"))["active"] == 2
    for task_id in (second, third):
        until(lambda task_id=task_id: asks(cli, task_id))
        assert cli("send", task_id, "y").code == 0
    for task_id in ids:
        assert until(lambda task_id=task_id: ended(cli, task_id))["status"] == "succeeded"


def test_a_supervisor_reads_the_screen_and_answers_over_http_and_mcp(
    run: Run, serve_http: Start, tmp_path: Path
) -> None:
    # Given a server with an interactive agent type, an admin, a user who owns two runs
    # of it, and a viewer,
    command = json.dumps([sys.executable, AGENT, "{prompt}"])
    (tmp_path / "slotline.yaml").write_text(
        f"agents:\n  asker:\n    command: {command}\n    interactive: true\n"
        f"users:\n  workspaces: [{json.dumps(str(tmp_path))}]\n"
    )
    url = serve_http()
    tokens = {
        role: ok(run("--json", "token", "create", "--role", role, "--name", role))["token"]
        for role in ("admin", "user", "viewer")
    }

    def remote(role: str, *args: str) -> Result:
        return run("--url", url, "--token", tokens[role], *args)

    asker = ("--json", "submit", "--agent", "asker", "--prompt", "Proceed? [y/n] ")
    ids = [ok(remote("user", *asker))["id"] for _ in range(2)]
    for task_id in ids:
        until(lambda task_id=task_id: asks(run, task_id), what="each question")

    # A viewer may not type; the owner answers the first through the server,
    refused = remote("viewer", "send", ids[0], "y")
    assert refused.code != 0
    assert "is a viewer: it can read, not change" in refused.err
    assert remote("user", "send", ids[0], "y").out.startswith(f"typed into {ids[0][:8]}")
    assert until(lambda: ended(run, ids[0]))["status"] == "succeeded"

    # and a supervising agent reads the second's screen and answers it over MCP.
    async def supervise() -> None:
        headers = {"Authorization": f"Bearer {tokens['user']}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            screen = await session.call_tool("task_log", {"task_id": ids[1]})
            assert "Proceed? [y/n]" in str(screen.content)
            typed = await session.call_tool("send_input", {"task_id": ids[1], "text": "no"})
            assert not typed.isError, typed.content

    anyio.run(supervise)
    task = until(lambda: ended(run, ids[1]), what="the second's end")
    assert task["status"] == "failed"
    assert task["attempts"][-1]["exit_code"] == 3


def test_an_interactive_log_is_capped_as_a_headless_one(
    cli: Run, serve: Serve, base_env: dict[str, str]
) -> None:
    # A node whose logs are cut at 4 KiB; a run that prints 200 KiB, then asks.
    base_env["SLOTLINE_LOG_MAX_BYTES"] = "4096"
    serve()
    chatty = "print('x' * 200_000, flush=True); input('Proceed? [y/n] ')"
    task_id = ok(cli("--json", "submit", "--interactive", "--", sys.executable, "-c", chatty))["id"]
    until(lambda: asks(cli, task_id), what="the question after the output")
    assert cli("send", task_id, "y").code == 0
    task = until(lambda: ended(cli, task_id), what="the run's end")
    assert task["status"] == "succeeded"
    log = Path(task["attempts"][-1]["log_path"])
    text = log.read_bytes()
    assert len(text) < 4096 + 1024
    assert b"[slotline: log cap of 4096 bytes reached; the rest is dropped]" in text
    assert b"bytes of output dropped]" in text
    assert b"Proceed?" in log.with_suffix(".tail").read_bytes()  # the last of it, kept


# Reads one line in raw mode (no 4 KiB line limit of a terminal's canonical mode) and
# prints how long it was and how it ended.
RAW_READER = """
import sys, termios, tty
tty.setraw(0)
print("ready", flush=True)
data = b""
while not data.endswith(b"\\r"):
    data += sys.stdin.buffer.read(1)
termios.tcsetattr(0, termios.TCSANOW, termios.tcgetattr(0))
print(f"\\r\\ngot {len(data) - 1} bytes ending {data[-12:-1]!r}", flush=True)
"""


def test_what_is_typed_and_run_reaches_the_run_as_it_is(cli: Run, serve: Serve) -> None:
    serve()
    # Arguments ending in `;` are the run's own, never the end of a tmux command,
    task_id = submit_asking(cli, "--title", "semicolons")
    until(lambda: asks(cli, task_id), what="the question")
    argv = ok(cli("--json", "show", task_id))["command"]
    assert argv[-1].endswith("asking_agent.py")
    assert cli("send", task_id, "yes;").code == 0
    assert until(lambda: ended(cli, task_id))["status"] == "failed"  # 'yes;' is not yes
    assert "asking_agent got 'yes;'" in cli("logs", task_id).out
    odd = ok(cli("--json", "submit", "--interactive", "--", sys.executable, AGENT, "ok?;"))["id"]
    until(
        lambda: "ok?;" in _screen(Terminal.of(task_of(cli, odd)["attempts"][-1]["log_path"])),
        what="q",
    )
    assert cli("send", odd, ";").code == 0
    assert "asking_agent got ';'" in until(lambda: ended(cli, odd) and cli("logs", odd).out)

    # and a long text is typed whole (tmux's command line would take 16 KB at most).
    reader = ok(cli("--json", "submit", "--interactive", "--", sys.executable, "-c", RAW_READER))
    until(lambda: running(cli, reader["id"]) and "ready" in cli("logs", reader["id"]).out)
    text = "x" * 40_000 + "the end;"
    assert cli("send", reader["id"], text).code == 0
    until(lambda: ended(cli, reader["id"]), what="the reader's end")
    assert "got 40008 bytes ending b'xxxthe end;'" in cli("logs", reader["id"]).out


def test_a_killed_session_hangs_up_its_run(cli: Run, serve: Serve) -> None:
    serve()
    task_id = submit_asking(cli)
    until(lambda: asks(cli, task_id), what="the question")
    terminal = Terminal.of(task_of(cli, task_id)["attempts"][-1]["log_path"])
    assert terminal is not None
    # Someone splits its window (the active pane is then another): `send` still types
    # into the run's own pane.
    subprocess.run(terminal.tmux("split-window", "-t", terminal.target, "sleep 60"), check=True)
    assert cli("send", task_id, "n").code == 0
    task = until(lambda: ended(cli, task_id), what="the answered run's end")
    assert task["attempts"][-1]["exit_code"] == 3

    other = submit_asking(cli)
    until(lambda: asks(cli, other), what="the second question")
    terminal = Terminal.of(task_of(cli, other)["attempts"][-1]["log_path"])
    assert terminal is not None
    subprocess.run(terminal.tmux("kill-session", "-t", terminal.target), check=True)
    task = until(lambda: ended(cli, other), what="the hung-up run's end")
    # The run ends as in any terminal that closed: killed by the SIGHUP its keeper passes
    # on, or, when the read on its closed terminal wakes it first (a busy machine), by
    # its own exit (the agent's 4 for "the terminal closed"; 120 when Python, exiting,
    # cannot flush to that terminal); either way it failed and its exit status is recorded.
    code = task["attempts"][-1]["exit_code"]
    assert task["status"] == "failed", task
    assert code in (-signal.SIGHUP, 4, 120), task
    if code == -signal.SIGHUP:
        assert "killed by SIGHUP" in task["failure_reason"]


def test_runs_that_end_at_once_start_one_after_another(cli: Run, serve: Serve) -> None:
    # Each one's session is the tmux server's last as it ends, the next one's the first.
    assert cli("limits", "--set", "max_concurrent=1").code == 0
    serve()
    ids = [
        ok(cli("--json", "submit", "--interactive", "--", sys.executable, "-c", "pass"))["id"]
        for _ in range(6)
    ]
    for task_id in ids:
        assert until(lambda task_id=task_id: ended(cli, task_id))["status"] == "succeeded"


def test_an_agent_types_first_input_is_typed_as_its_run_starts(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # An agent that takes its first message on its terminal, not its command line.
    command = json.dumps([sys.executable, AGENT, "Your request? "])
    (tmp_path / "slotline.yaml").write_text(
        f"agents:\n  asker:\n    command: {command}\n    interactive: true\n"
        "    first_input: 'yes, {prompt}'\n"
    )
    serve("--config", str(tmp_path / "slotline.yaml"))
    task = ok(cli("--json", "submit", "--agent", "asker", "--prompt", "fix the tests"))
    assert task["first_input"] == "yes, fix the tests"
    done = until(lambda: ended(cli, task["id"]), what="the run's end")
    assert "asking_agent got 'yes, fix the tests'" in cli("logs", task["id"]).out
    assert done["status"] == "failed"  # 'yes, fix the tests' is not a plain yes
