"""Interactive runs: a command started in a terminal of its own, in a tmux session that
people attach to (`slotline attach`), type into (`slotline send`,
`runner/terminal_input.py`) and watch from the dashboard. The terminal itself, its tmux
server and the names it is found by: `runner/tmux.py`.

The first process of the session's pane is the run's keeper (`wrap.py --pane`): as for a
headless run it writes the command's exit status to a file, it leads the run's process
group (the pane's), which a stop signals, and the node waits on it by its pid and start
time. tmux copies what the pane prints to the attempt's log (`pipe-pane` into
`wrap.py --tee`): escape sequences and all, capped as a headless run's log is, so that a
replay shows the screen and `logs` shows it stripped (`runlogs.plain_text`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from slotline.runner.capabilities import memory_cap
from slotline.runner.files import private_dir
from slotline.runner.keepers import WRAP
from slotline.runner.process import (
    ProcessHandle,
    SpawnError,
    check_program,
    clear_earlier,
    process_start_time,
)
from slotline.runner.tmux import (
    Terminal,
    TerminalError,
    session_name,
    sidecar,
    socket_path,
    tmux_binary,
    tmux_env,
)

# The terminal's size before anyone attaches (an attached client resizes it).
COLUMNS, LINES = 120, 40
# What tmux sets for every session of slotline's server (`tmux set-option -g`): the
# bar says which run the terminal is and how to leave it running.
_OPTIONS = (
    ("status-left", "[slotline #{=8:session_name}] "),
    ("status-left-length", "40"),
    ("status-right", "detach: C-b d "),
    ("default-terminal", "screen-256color"),
    ("history-limit", "10000"),
    # An agent's TUI that asks for focus events gets them (Claude Code otherwise prints
    # a notice about it, output that would end a quiet spell).
    ("focus-events", "on"),
)


def _config(log_dir: Path) -> str:
    """slotline's tmux configuration (`_OPTIONS`), written into the log folder (whole:
    through a temporary file of its own, as two starts may write it at once)."""
    path = log_dir / "tmux.conf"
    text = "".join(f"set-option -g {name} {shlex.quote(value)}\n" for name, value in _OPTIONS)
    try:
        if path.read_text() == text:
            return str(path)
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=log_dir, prefix=".tmux.conf.")
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(tmp, path)
    return str(path)


async def spawn_in_terminal(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    log_path: Path,
    log_dir: Path,
    memory_mb: int | None = None,
    log_max_bytes: int = 50 * 1024 * 1024,
    fence: str = "",
) -> ProcessHandle:
    """Start `argv` under its keeper in a new tmux session on the tmux server of the node
    whose log folder is `log_dir` (`process.spawn`'s interactive twin): its terminal is
    named in `N.tmux`, its output goes to `log_path`.

    Raises:
        SpawnError: the workspace, the program or tmux is missing, or tmux failed.
    """
    started = await asyncio.to_thread(
        _start, argv, cwd, env, log_path, log_dir, memory_mb, log_max_bytes, fence
    )
    pid, pid_started = started
    return ProcessHandle(
        pid, pid_started, log_path, log_path.with_suffix(".exit"), teed=teed_path(log_path)
    )


def teed_path(log_path: Path) -> Path:
    """The file `wrap.py --tee` writes once the whole output is in the log."""
    return log_path.with_suffix(".teed")


# What tmux says when a server it reached is exiting (its last session ended just now):
# a new session is tried again on a new server.
_EXITING = ("server exited unexpectedly", "lost server", "no server running", "error connecting")
_TRIES = 3


def _start(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    log_path: Path,
    log_dir: Path,
    memory_mb: int | None,
    log_max_bytes: int,
    fence: str,
) -> tuple[int, float | None]:
    try:
        tmux_binary()
        socket = socket_path(log_dir)
    except TerminalError as exc:
        raise SpawnError(str(exc)) from None
    check_program(argv, cwd, env)
    private_dir(log_path.parent)
    clear_earlier(log_path)
    for stale in (teed_path(log_path), sidecar(log_path)):
        stale.unlink(missing_ok=True)
    log_path.touch(mode=0o600)
    terminal = Terminal(socket, session_name(log_path))
    # What the run is (its argv, folder and environment, keys among them) goes to the
    # keeper in a file only this user reads, which the keeper removes: on tmux's command
    # line it would be in every `ps`, and tmux would parse it.
    spec = log_path.with_suffix(".env")
    fd = os.open(spec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump({"argv": argv, "cwd": cwd or "", "env": env}, file)
    exit_path = log_path.with_suffix(".exit")
    cap = memory_cap(memory_mb, log_path)
    keeper = [
        sys.executable, "-I", "-S", WRAP, "--pane", str(spec), str(exit_path), str(cap),
        str(log_max_bytes), fence,
    ]  # fmt: skip
    # tmux runs a pipe-pane command with /bin/sh -c, after expanding its #{formats}: our
    # own argv, every part quoted, every # doubled.
    teeing = shlex.join(
        [sys.executable, "-I", "-S", WRAP, "--tee", str(log_path), str(log_max_bytes)]
    ).replace("#", "##")
    # One tmux command list: the session and its log are in place before tmux reads
    # anything the command prints. The server, if this starts it, reads slotline's own
    # configuration (`_OPTIONS`), never the user's.
    command = terminal.tmux(
        "new-session", "-d", "-s", terminal.session, "-x", str(COLUMNS), "-y", str(LINES),
        "-P", "-F", "#{pane_pid} #{pane_id}", "--", *keeper,
        ";", "pipe-pane", "-O", "-t", terminal.target, "exec " + teeing,
        config=_config(log_dir),
    )  # fmt: skip
    try:
        pid, pane = _new_session(command, argv[0])
        terminal = Terminal(socket, terminal.session, pane)
        terminal.save(log_path)
    except BaseException:
        spec.unlink(missing_ok=True)
        with contextlib.suppress(TerminalError):
            terminal._run(["kill-session", "-t", terminal.target])  # nothing left running
        raise
    return pid, process_start_time(pid)


def _new_session(command: list[str], program: str) -> tuple[int, str]:
    """Run the tmux command list that starts a run's session; its keeper's pid and its
    pane's id. A server that exits as it is reached (its last session just ended) is
    left to go, and the session is started on a new one.

    Raises:
        SpawnError: tmux failed (its reason).
    """
    for attempt in range(1, _TRIES + 1):
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=30, check=False, env=tmux_env()
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SpawnError(f"cannot start tmux: {exc}") from exc
        said = done.stdout.split()
        if done.returncode == 0 and len(said) == 2 and said[0].isdigit():
            return int(said[0]), said[1]
        why = done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}"
        if attempt == _TRIES or not any(exiting in why for exiting in _EXITING):
            raise SpawnError(f"cannot start a terminal for {program}: tmux: {why}")
        time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")
