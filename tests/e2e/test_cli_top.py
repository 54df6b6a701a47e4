"""`slotline top`: one frame when piped; full screen with keys in a real terminal (tmux)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from slotline.models import Status
from slotline.store import Store
from waiting import until

from .conftest import Run

Pane = Callable[..., str]


@pytest.fixture
def line(store: Store, tmp_path: Path) -> Iterator[dict[str, str]]:
    """A running task whose attempt is a real process (pid recorded as a node would),
    and two queued ones. Two slots, so the bar reads 1/2."""
    ids = {
        name: store.submit({"command": ["sleep", "60"], "title": name}).id
        for name in ("agent", "second", "third")
    }
    (claim,) = store.claim("test-node").claims  # the store fixture has one slot
    store.set_setting("max_concurrent", 2)
    process = subprocess.Popen(["sleep", "60"])
    started = psutil.Process(process.pid).create_time()
    store.record_start(claim.attempt.id, claim.attempt.token, process.pid, started)
    ids["pid"] = str(process.pid)
    yield ids
    process.kill()
    process.wait()


def test_top_piped_prints_one_frame(cli: Run, line: dict[str, str]) -> None:
    result = cli("top")
    assert result.code == 0
    assert "1/2 running · 1 slot available · 2 queued" in result.out
    running = next(row for row in result.out.splitlines() if line["agent"][:8] in row)
    assert line["pid"] in running
    assert running.rstrip()[-1] in "BKMG"  # the RSS of its process tree
    assert "NEXT UP" in result.out
    assert result.out.index(line["second"][:8]) < result.out.index(line["third"][:8])
    assert "q quit" not in result.out  # no keys off a terminal


@pytest.fixture
def tmux(tmp_path: Path, base_env: dict[str, str]) -> Iterator[Callable[..., str]]:
    """Run tmux commands on a private server (killed at the end); returns their output."""
    if shutil.which("tmux") is None:
        pytest.fail("tmux is required for this test (apt-get install tmux); .ci/run installs it")
    socket = str(tmp_path / "tmux.sock")
    env = {k: v for k, v in base_env.items() if k not in ("COLUMNS", "LINES")}

    def run(*args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", socket, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=True,
        )
        return done.stdout

    yield run
    subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, check=False)


def until_pane(tmux: Callable[..., str], text: str) -> str:
    """The screen once it shows `text` (polled, with a deadline)."""
    deadline = time.monotonic() + 30
    while True:
        screen = tmux("capture-pane", "-p", "-t", "top")
        if text in screen:
            return screen
        assert time.monotonic() < deadline, f"{text!r} never showed; the screen:\n{screen}"
        time.sleep(0.05)


def test_top_shows_the_line_live_and_steers_it_with_keys(
    tmux: Callable[..., str], store: Store, line: dict[str, str], tmp_path: Path
) -> None:
    command = shlex.join([sys.executable, "-m", "slotline", "top"])
    shell = f'cd {shlex.quote(str(tmp_path))} && {command}; echo "top exited $?"; exec sleep 600'
    tmux("new-session", "-d", "-s", "top", "-x", "150", "-y", "40", shell)

    screen = until_pane(tmux, "NEXT UP")
    assert "1/2 running · 1 slot available · 2 queued" in screen
    assert "█" in screen
    assert line["pid"] in screen
    assert screen.index(line["second"][:8]) < screen.index(line["third"][:8])
    assert "q quit" in screen

    # The first ↓ selects the running task, the second the task at position 1; `d` moves
    # it down one place.
    tmux("send-keys", "-t", "top", "Down", "Down", "d")
    until(lambda: [t.title for t in store.status().queued] == ["third", "second"])
    until_pane(tmux, f"moved {line['second'][:8]}")

    # `c` asks first; only `y` cancels.
    tmux("send-keys", "-t", "top", "c")
    until_pane(tmux, f"cancel {line['second'][:8]}? y/n")
    tmux("send-keys", "-t", "top", "y")
    until(lambda: store.get(line["second"]).status is Status.CANCELLED)
    screen = until_pane(tmux, "1 queued")
    queue, _ = screen.split("QUEUED")[1].split(f"cancelled {line['second'][:8]}")
    assert line["second"][:8] not in queue
    assert line["third"][:8] in queue

    # `b` bumps: the task starts at the next dispatch, over the limit if need be.
    tmux("send-keys", "-t", "top", "Down", "Down", "b")
    until(lambda: store.get(line["third"]).boosted)
    until_pane(tmux, f"bumped {line['third'][:8]}")

    # A change made elsewhere shows without a key press.
    store.submit({"command": ["true"], "title": "fourth"})
    until_pane(tmux, "2 queued")

    tmux("send-keys", "-t", "top", "q")
    screen = until_pane(tmux, "top exited 0")
    assert "NEXT UP" not in screen  # the full-screen view is gone, the terminal restored


def until_gone(tmux: Callable[..., str], text: str) -> str:
    """The screen once it no longer shows `text` (polled, with a deadline)."""
    deadline = time.monotonic() + 30
    while True:
        screen = tmux("capture-pane", "-p", "-t", "top")
        if text not in screen:
            return screen
        assert time.monotonic() < deadline, f"{text!r} never went; the screen:\n{screen}"
        time.sleep(0.05)


def test_a_stalled_run_shows_its_badge_in_top_status_and_ls(
    cli: Run, tmux: Callable[..., str], store: Store, line: dict[str, str], tmp_path: Path
) -> None:
    # Given top running live on a line whose running task has not stalled,
    command = shlex.join([sys.executable, "-m", "slotline", "top"])
    shell = f'cd {shlex.quote(str(tmp_path))} && {command}; echo "top exited $?"; exec sleep 600'
    tmux("new-session", "-d", "-s", "top", "-x", "150", "-y", "40", shell)
    assert "STALLED" not in until_pane(tmux, "NEXT UP")
    running = store.get(line["agent"])
    assert running.current_attempt is not None

    # When its run goes quiet (as the node's stall watch marks it),
    assert store.mark_stalled(running.id, running.current_attempt, "no output for 10m")

    # Then top shows the badge on its row, and so do status and ls,
    screen = until_pane(tmux, "STALLED")
    row = next(r for r in screen.splitlines() if "STALLED" in r)
    assert "agent" in row
    for args in (("status",), ("ls",), ("top",)):
        out = cli(*args).out
        stalled = [r for r in out.splitlines() if "STALLED" in r]
        assert len(stalled) == 1, (args, out)
        assert line["agent"][:8] in stalled[0] or "agent" in stalled[0], (args, out)

    # and once it prints again, the badge goes.
    assert store.clear_stalled(running.id, running.current_attempt)
    until_gone(tmux, "STALLED")
    assert "STALLED" not in cli("status").out
    tmux("send-keys", "-t", "top", "q")
    until_pane(tmux, "top exited 0")
