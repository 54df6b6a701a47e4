"""`slotline logs` on a terminal shows a run's control characters escaped, as `ls` and
`show` do; `--raw`, or a pipe, keeps the bytes as written (a real pseudo-terminal)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slotline.store import Store

from .conftest import Run
from .test_cli_ops import put, run_once

# Recolours, retitles the window, clears the screen, reverses the text; then a plain line.
HOSTILE = "red \x1b[31mtext\x1b]0;pwned\x07\x1b[2J\u202eabc\r\nnext\tline ✓\n"
ESCAPED = "red \\x1b[31mtext\\x1b]0;pwned\\x07\\x1b[2J\\u202eabc\\x0d"


def on_a_terminal(env: dict[str, str], cwd: Path, *args: str) -> str:
    """Run the CLI with stdout on a pseudo-terminal; returns what the terminal got."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "slotline", *args],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    )
    os.close(follower)
    got = bytearray()
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's last writer is gone
                break
            if not data:
                break
            got += data
    finally:
        os.close(leader)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # The terminal turns each newline into CR LF on the way out.
    return got.decode().replace("\r\n", "\n")


@pytest.fixture
def hostile_task(store: Store, tmp_path: Path) -> str:
    task = put(store)
    run_once(store, tmp_path / "1.log", 0)
    (tmp_path / "1.log").write_bytes(HOSTILE.encode())
    return task


@pytest.mark.parametrize("follow", [(), ("--follow",)], ids=["logs", "logs-f"])
def test_logs_on_a_terminal_escape_control_characters(
    base_env: dict[str, str], tmp_path: Path, hostile_task: str, follow: tuple[str, ...]
) -> None:
    shown = on_a_terminal(base_env, tmp_path, "logs", *follow, hostile_task)
    assert "\x1b" not in shown
    assert "\x07" not in shown
    assert "\u202e" not in shown
    assert shown == ESCAPED + "\nnext\tline ✓\n"


def test_logs_raw_on_a_terminal_and_logs_in_a_pipe_keep_the_bytes(
    base_env: dict[str, str], tmp_path: Path, cli: Run, hostile_task: str
) -> None:
    raw = on_a_terminal(base_env, tmp_path, "logs", "--raw", hostile_task)
    assert "\x1b[31m" in raw
    assert "\x1b]0;pwned\x07" in raw
    assert "\u202e" in raw
    piped = cli("logs", hostile_task)
    assert piped.code == 0
    assert piped.out == HOSTILE.replace("\r\n", "\n")  # text mode reads CR LF as LF
    assert cli("logs", "--raw", "--follow", hostile_task).out == piped.out
