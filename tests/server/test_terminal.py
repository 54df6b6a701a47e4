"""The live terminal of an interactive run over a WebSocket (`/api/tasks/{id}/terminal`),
against a real server, node and tmux: bytes both ways, resize, who may type, and the
refusals a page shows (a close code and its reason)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from slotline.models import Status
from slotline.runner.tmux import Terminal, tmux_env
from slotline.server import revoke_token
from slotline.server import terminal as terminal_module
from slotline.server.terminal import (
    CLOSE_BUSY,
    CLOSE_DETACHED,
    CLOSE_NO_TASK,
    CLOSE_NO_TERMINAL,
)
from slotline.store import Store
from waiting import until

from .conftest import Running, ServerFactory

ASKING = str(Path(__file__).parents[1] / "asking_agent.py")
QUESTION = b"Proceed? [y/n]"


@pytest.fixture(autouse=True)
def _tmux() -> None:
    if shutil.which("tmux") is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is required in CI (.ci/run installs it)")
        pytest.skip("tmux is not installed")


@pytest.fixture
def server(make_server: ServerFactory) -> Running:
    """A server with a node, in token mode: admin `boss`, users `alice` and `bob`, viewer
    `watcher`."""
    return make_server(node=True)


@pytest.fixture
def tokens(server: Running) -> dict[str, str]:
    return {
        name: server.token(name, role)
        for name, role in (
            ("boss", "admin"),
            ("alice", "user"),
            ("bob", "user"),
            ("watcher", "viewer"),
        )
    }


def socket(server: Running, task_id: str, token: str, query: str = "") -> ClientConnection:
    url = f"{server.url.replace('http://', 'ws://')}/api/tasks/{task_id}/terminal{query}"
    return connect(url, subprotocols=["slotline", f"slotline-token.{token}"], open_timeout=10)


def interactive(store: Store, user: str = "alice") -> str:
    """An interactive asking agent of `user`'s, once it waits for its answer."""
    task = store.submit(
        {"command": [sys.executable, ASKING], "interactive": True, "user": user, "title": "ask"}
    )
    until(lambda: store.get(task.id).status is Status.RUNNING, what="the run starting")
    terminal = until(lambda: Terminal.of(store.get(task.id).attempts[-1].log_path))
    until(lambda: "Proceed?" in terminal.screen(), what="the question")
    return task.id


def terminal_of(store: Store, task_id: str) -> Terminal:
    found = Terminal.of(store.get(task_id).attempts[-1].log_path)
    assert found is not None
    return found


def attached(conn: ClientConnection) -> dict[str, Any]:
    """The server's first frame: how this client is attached."""
    frame = conn.recv(timeout=10)
    assert isinstance(frame, str), frame
    found: dict[str, Any] = json.loads(frame)["attached"]
    return found


def read_until(conn: ClientConnection, wanted: bytes) -> bytes:
    """Terminal bytes until `wanted` has been seen."""
    seen = b""
    while wanted not in seen:
        frame = conn.recv(timeout=15)
        assert isinstance(frame, bytes), frame
        seen += frame
    return seen


def closed(conn: ClientConnection) -> tuple[int, str]:
    """Read to the end of the stream: the server's close code and reason."""
    try:
        while True:
            conn.recv(timeout=15)
    except ConnectionClosed as ended:
        received = ended.rcvd
    assert received is not None, "the server did not close the socket"
    return received.code, received.reason


def clients(terminal: Terminal) -> list[str]:
    """The tmux clients attached to the run's session now."""
    done = subprocess.run(
        terminal.tmux("list-clients", "-t", terminal.target, "-F", "#{client_readonly}"),
        capture_output=True, text=True, env=tmux_env(), check=False,
    )  # fmt: skip
    return done.stdout.split()


def window_size(terminal: Terminal) -> str:
    done = subprocess.run(
        terminal.tmux("display", "-p", "-t", terminal.target, "#{window_width}x#{window_height}"),
        capture_output=True, text=True, env=tmux_env(), check=True,
    )  # fmt: skip
    return done.stdout.strip()


@pytest.fixture
def asking(server: Running, tokens: dict[str, str]) -> str:
    """alice's interactive run, asking (the tokens exist first: the server is in token
    mode)."""
    return interactive(server.store)


def test_the_owner_answers_the_run_through_the_socket(
    server: Running, tokens: dict[str, str], asking: str
) -> None:
    store, terminal = server.store, terminal_of(server.store, asking)
    # Given the owner attached, who sees the question…
    with socket(server, asking, tokens["alice"], "?cols=100&rows=30") as conn:
        assert attached(conn) == {"read_only": False}
        read_until(conn, QUESTION)
        # …and the terminal at the size the page asked for (tmux's bar takes a row)…
        until(lambda: window_size(terminal) == "100x29", what="the asked size")
        conn.send(json.dumps({"resize": [90, 25]}))
        until(lambda: window_size(terminal) == "90x24", what="the resize")
        # …when they type yes and Enter, the run reads it, prints, and ends.
        conn.send(b"yes\r")
        read_until(conn, b"asking_agent got 'yes'")
        assert closed(conn) == (1000, "the run ended")
    until(lambda: store.get(asking).status is Status.SUCCEEDED, what="the run succeeding")
    assert store.get(asking).exit_code == 0


def test_leaving_ends_only_the_client_and_the_run_waits(
    server: Running, tokens: dict[str, str], asking: str
) -> None:
    store, terminal = server.store, terminal_of(server.store, asking)
    with socket(server, asking, tokens["boss"]) as conn:
        assert attached(conn) == {"read_only": False}
        read_until(conn, QUESTION)
        assert clients(terminal) == ["0"]
    # The browser went away: its tmux client is ended, the run goes on, asking.
    until(lambda: clients(terminal) == [], what="the tmux client ending")
    assert store.get(asking).status is Status.RUNNING
    assert terminal.alive()
    # An admin attaches again, detaches with tmux's own keys (C-b d): the socket closes
    # saying so, and the run still waits.
    with socket(server, asking, tokens["boss"]) as conn:
        attached(conn)
        read_until(conn, QUESTION)
        conn.send(b"\x02d")
        assert closed(conn) == (CLOSE_DETACHED, "detached: the run goes on")
    assert store.get(asking).status is Status.RUNNING
    # Then attaches once more and answers.
    with socket(server, asking, tokens["boss"]) as conn:
        attached(conn)
        read_until(conn, QUESTION)
        conn.send(b"yes\r")
        read_until(conn, b"asking_agent got 'yes'")
    until(lambda: store.get(asking).status is Status.SUCCEEDED, what="the run succeeding")


def test_a_viewer_watches_read_only_and_their_typing_never_reaches_the_run(
    server: Running, tokens: dict[str, str], asking: str
) -> None:
    store, terminal = server.store, terminal_of(server.store, asking)
    with socket(server, asking, tokens["watcher"]) as conn:
        assert attached(conn) == {"read_only": True}
        read_until(conn, QUESTION)
        assert clients(terminal) == ["1"]  # tmux's own read-only client, too
        conn.send(b"no\r")
        conn.send(json.dumps({"resize": [50, 10]}))
    until(lambda: clients(terminal) == [], what="the viewer's client ending")
    assert store.get(asking).status is Status.RUNNING
    # Had the viewer's "no" reached the run, it would have ended with code 3, or read
    # "noyes" below: the owner's answer is the first thing it reads.
    with socket(server, asking, tokens["alice"]) as conn:
        attached(conn)
        conn.send(b"yes\r")
        read_until(conn, b"asking_agent got 'yes'")
    until(lambda: store.get(asking).status is Status.SUCCEEDED, what="the run succeeding")


def test_a_token_revoked_while_attached_ends_the_socket_and_its_client(
    server: Running, tokens: dict[str, str], asking: str
) -> None:
    terminal = terminal_of(server.store, asking)
    with socket(server, asking, tokens["watcher"]) as conn:
        attached(conn)
        read_until(conn, QUESTION)
        assert revoke_token("watcher", server.tokens_path)
        code, reason = closed(conn)
    assert code == 1008
    assert reason.startswith("access ended: the token is not valid")
    until(lambda: clients(terminal) == [], what="the viewer's client ending")
    assert server.store.get(asking).status is Status.RUNNING


def test_terminals_are_bounded_and_each_one_closed_frees_its_place(
    server: Running, tokens: dict[str, str], asking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terminal_module, "MAX_OPEN", 1)
    with socket(server, asking, tokens["alice"]) as first:
        attached(first)
        with socket(server, asking, tokens["watcher"]) as second:
            assert closed(second) == (
                CLOSE_BUSY,
                "1 terminals are open on this server: close one, try again",
            )
    until(lambda: not terminal_module.OPEN, what="the first terminal's place freed")
    with socket(server, asking, tokens["watcher"]) as third:
        assert attached(third) == {"read_only": True}


def test_a_task_without_a_terminal_is_refused_with_its_reason(
    server: Running, tokens: dict[str, str]
) -> None:
    store = server.store
    headless = store.submit({"command": ["sleep", "30"], "user": "alice"})
    until(lambda: store.get(headless.id).status is Status.RUNNING, what="the headless run")
    held = store.submit(
        {"command": [sys.executable, ASKING], "interactive": True, "hold": True, "user": "alice"}
    )

    with socket(server, headless.id, tokens["alice"]) as conn:
        code, reason = closed(conn)
    assert code == CLOSE_NO_TERMINAL
    assert reason == f"task {headless.id[:8]} is not interactive: it has no terminal; see its log"
    with socket(server, held.id, tokens["alice"]) as conn:
        code, reason = closed(conn)
    assert code == CLOSE_NO_TERMINAL
    assert reason.startswith(f"task {held.id[:8]} is held, not running")


def test_an_unknown_task_and_another_users_are_refused_alike(
    server: Running, tokens: dict[str, str], asking: str
) -> None:
    with socket(server, "0" * 32, tokens["bob"]) as conn:
        unknown = closed(conn)
    with socket(server, asking, tokens["bob"]) as conn:
        hidden = closed(conn)
    assert unknown[0] == hidden[0] == CLOSE_NO_TASK
    assert hidden[1] == f"no task matches {asking!r}"
    with socket(server, asking, "slt_mistyped") as conn:
        code, reason = closed(conn)
    assert code == 1008
    assert "not valid" in reason


def test_a_run_of_another_machine_is_refused_naming_where_to_attach(
    make_server: ServerFactory,
) -> None:
    # Given an interactive task run by a node elsewhere (its terminal is on that machine)…
    server = make_server()
    admin = server.token("boss", "admin")
    task = server.store.submit({"command": [sys.executable, ASKING], "interactive": True})
    (claim,) = server.store.claim("elsewhere", limit=1).claims
    assert claim.task.id == task.id
    # …this server has no terminal to give, and says where it is.
    with socket(server, task.id, admin) as conn:
        code, reason = closed(conn)
    assert code == CLOSE_NO_TERMINAL
    assert reason == (
        f"task {task.id[:8]} runs on node elsewhere, whose terminal is not on this server's "
        f"machine: run `slotline attach {task.id[:8]}` there"
    )


def test_keys_for_a_run_that_gave_its_slot_back_wait_for_a_slot(
    server: Running, tokens: dict[str, str], asking: str
) -> None:
    store, terminal = server.store, terminal_of(server.store, asking)
    # Given the run gave its slot back as its node does (input off, then the release),
    # and another task took the one slot,
    store.set_setting("max_concurrent", 1)
    terminal.allow_input(False)
    attempt = store.get(asking).current_attempt
    assert attempt is not None
    assert store.mark_needs_input(asking, attempt, "quiet", release=True)
    other = store.submit({"command": ["sleep", "60"], "title": "other"})
    until(lambda: store.get(other.id).status is Status.RUNNING, what="the other start")
    with socket(server, asking, tokens["alice"]) as conn:
        assert attached(conn) == {"read_only": False}
        read_until(conn, QUESTION)
        # when the owner types, no slot is free: the page is told, nothing reaches the run;
        conn.send(b"n")
        read_until(conn, b"[slotline: no slot is free to take back (the 1 slot is taken)")
        assert store.get(asking).slot_released is not None
        # once the other ends, the next key takes a slot, then reaches the run.
        store.terminate(other.id)
        until(lambda: store.get(other.id).status.terminal, what="the other's end")
        conn.send(b"yes\r")
        read_until(conn, b"asking_agent got 'yes'")
    until(lambda: store.get(asking).status is Status.SUCCEEDED, what="the run succeeding")
    assert "slot_retaken" in [e.kind for e in store.task_events(asking)]
