"""Interactive runs: a command in a terminal of its own, in a tmux session that people
attach to (`slotline attach`), type into (`slotline send`) and watch from the dashboard.

tmux is the terminal: each run is one session on a tmux server of slotline's own (a
private socket in the log folder, never the user's default server; `-f /dev/null`, so a
user's ~/.tmux.conf does not change how runs behave). The server outlives the node, so
a node killed with SIGKILL finds its interactive runs going on when it restarts, as it
finds headless ones.

The first process of the session's pane is the run's keeper (`wrap.py --pane`): as for a
headless run it writes the command's exit status to a file, it leads the run's process
group (the pane's), which a stop signals, and the node waits on it by its pid and start
time. tmux copies what the pane prints to the attempt's log (`pipe-pane` into
`wrap.py --tee`): escape sequences and all, capped as a headless run's log is, so that a
replay shows the screen and `logs` shows it stripped (`runlogs.plain_text`).

Beside the log `N.log`, `N.tmux` names the run's server and session: what `attach`,
`send` and the dashboard's terminal use, wherever on this machine they run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from slotline.errors import InvalidInput, InvalidTransition
from slotline.models import Status, Task
from slotline.runner.capabilities import memory_cap
from slotline.runner.files import private_dir
from slotline.runner.process import (
    WRAP,
    ProcessHandle,
    SpawnError,
    check_program,
    clear_earlier,
    process_start_time,
)

if TYPE_CHECKING:
    from slotline.store import Store

# The terminal's size before anyone attaches (an attached client resizes it).
COLUMNS, LINES = 120, 40
# A Unix socket's path is at most 108 bytes (104 on macOS): a longer log folder gets a
# socket in a private folder under the temporary directory, named by the folder's hash.
_SOCKET_MAX = 100
# What tmux sets for every session of slotline's server (`tmux set-option -g`): the
# bar says which run the terminal is and how to leave it running.
_OPTIONS = (
    ("status-left", "[slotline #{=8:session_name}] "),
    ("status-left-length", "40"),
    ("status-right", "detach: C-b d "),
    ("default-terminal", "screen-256color"),
    ("history-limit", "10000"),
)


class NoSlot(InvalidTransition):
    """A run that gave its slot back cannot take one again now: `limit` says which limit
    keeps it out."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class TerminalError(Exception):
    """A run's terminal could not be reached (tmux missing, the run gone, another machine)."""


@dataclass(frozen=True, slots=True)
class Terminal:
    """Where an interactive run's terminal is: a tmux server's socket and a session on it."""

    socket: str
    session: str

    def tmux(self, *args: str, config: str = os.devnull) -> list[str]:
        """The argv of a tmux command on this terminal's server (`config`: what the
        server reads if this command starts it)."""
        return [tmux_binary(), "-S", self.socket, "-f", config, *args]

    def save(self, log_path: Path) -> None:
        """Write `N.tmux` beside the run's log `N.log`."""
        path = sidecar(log_path)
        path.write_text(json.dumps({"socket": self.socket, "session": self.session}) + "\n")
        os.chmod(path, 0o600)

    @classmethod
    def of(cls, log_path: str | Path | None) -> Terminal | None:
        """The terminal of the run whose log is `log_path`, if it is an interactive run
        of this machine (None otherwise)."""
        if not log_path:
            return None
        try:
            data = json.loads(sidecar(Path(log_path)).read_text())
            return cls(str(data["socket"]), str(data["session"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def alive(self) -> bool:
        """Whether the session still exists (its run has not ended)."""
        try:
            done = subprocess.run(
                self.tmux("has-session", "-t", self.target),
                capture_output=True,
                timeout=10,
                check=False,
                env=tmux_env(),
            )
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    @property
    def target(self) -> str:
        """The session (its current pane) as a tmux target: `=NAME:` matches that name
        exactly, never a prefix."""
        return f"={self.session}:"

    def send(self, text: str, enter: bool = True) -> None:
        """Type `text` into the run's terminal (literally: no key names), then Enter.

        Raises:
            TerminalError: the session is gone (the run ended) or tmux failed.
        """
        commands = ["send-keys", "-t", self.target, "-l", "--", text]
        if enter:
            commands += [";", "send-keys", "-t", self.target, "Enter"]
        if not text:
            commands = ["send-keys", "-t", self.target, "Enter"]
        self._run(commands)

    def allow_input(self, allowed: bool) -> None:
        """Let what is typed reach the run (True), or drop it (False: a run that gave its
        slot back takes no input until it holds one again)."""
        self._run(["select-pane", "-t", self.target, "-e" if allowed else "-d"])

    def screen(self) -> str:
        """What the terminal shows now, as plain text (tmux's `capture-pane`)."""
        return self._run(["capture-pane", "-p", "-t", self.target])

    def _run(self, args: list[str]) -> str:
        try:
            done = subprocess.run(
                self.tmux(*args),
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
                env=tmux_env(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TerminalError(f"tmux failed: {exc}") from exc
        if done.returncode != 0:
            why = done.stderr.strip() or f"tmux exited {done.returncode}"
            if (
                "can't find session" in why
                or "no server running" in why
                or "error connecting" in why
            ):
                raise TerminalError("its terminal is gone: the run has ended")
            raise TerminalError(why)
        return done.stdout

    def attach_argv(self, read_only: bool = False) -> list[str]:
        """The argv that attaches the caller's terminal to the run (`-r`: watch only)."""
        return self.tmux("attach-session", *(["-r"] if read_only else []), "-t", self.target)


def _config(log_dir: Path) -> str:
    """slotline's tmux configuration (`_OPTIONS`), written once into the log folder."""
    path = log_dir / "tmux.conf"
    text = "".join(f"set-option -g {name} {shlex.quote(value)}\n" for name, value in _OPTIONS)
    try:
        if path.read_text() == text:
            return str(path)
    except OSError:
        pass
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return str(path)


# The most text one `send` types (a pasted answer, a prompt; not a file).
MAX_INPUT = 64 * 1024


def terminal_of(task: Task) -> Terminal:
    """The terminal of the task's running attempt, on this machine.

    Raises:
        InvalidInput: the task is not interactive.
        InvalidTransition: it has no live terminal now (not started, ended, starting, or
            running on another machine); the message says which.
    """
    short = task.id[:8]
    if not task.interactive:
        raise InvalidInput(
            f"task {short} is not interactive: it runs without a terminal (its output: "
            f"slotline logs {short}); submit with --interactive, or an agent type with "
            "interactive: true"
        )
    if task.status.terminal:
        raise InvalidTransition(f"task {short} has ended ({task.status}): its terminal is gone")
    if task.status is not Status.RUNNING:
        raise InvalidTransition(f"task {short} is {task.status}: it has no terminal until it runs")
    attempt = task.attempts[-1] if task.attempts else None
    if attempt is None or not attempt.log_path:
        raise InvalidTransition(f"task {short} is starting: its terminal is not there yet")
    terminal = Terminal.of(attempt.log_path)
    if terminal is None:
        node = f"node {attempt.node_id}" if attempt.node_id else "another node"
        raise InvalidTransition(
            f"task {short} runs on {node}, whose terminals are not on this machine: "
            "attach or send there (or through that node's server)"
        )
    return terminal


def send_input(task: Task, text: str, enter: bool = True, store: Store | None = None) -> None:
    """Type `text` (then Enter, unless `enter` is false) into the task's run. A run that
    gave its slot back while it waited (`release_while_idle`) takes one again in `store`
    first: without one free, nothing is typed.

    Raises:
        InvalidInput: the task is not interactive, or the text is too long or has a NUL.
        InvalidTransition: it has no terminal now (`terminal_of`), it just ended, or it
            cannot take a slot again now (the limit that keeps it out, in words).
    """
    if len(text.encode()) > MAX_INPUT:
        raise InvalidInput(f"text: at most {MAX_INPUT} bytes at a time")
    if "\x00" in text:
        raise InvalidInput("text: must not contain NUL bytes")
    terminal = terminal_of(task)
    try:
        if task.slot_released is not None:
            retake(task, terminal, store)
        terminal.send(text, enter)
    except TerminalError as exc:
        raise InvalidTransition(f"task {task.id[:8]}: {exc}") from None


def retake(task: Task, terminal: Terminal, store: Store | None) -> None:
    """Take a slot again for a run that gave its back, then let input reach it.

    Raises:
        InvalidTransition: no slot is free for it now (nothing changed), or no store.
        TerminalError: its terminal is gone.
    """
    short = task.id[:8]
    if store is None or task.current_attempt is None:
        raise InvalidTransition(f"task {short} gave its slot back while it waited for input")
    full = store.retake_slot(task.id, task.current_attempt)
    if full is not None:
        raise NoSlot(
            f"task {short} gave its slot back while it waited for input and cannot take "
            f"one again now ({full}); nothing was typed",
            full,
        )
    terminal.allow_input(True)


def sidecar(log_path: Path) -> Path:
    return log_path.with_suffix(".tmux")


def tmux_binary() -> str:
    """tmux on the PATH.

    Raises:
        TerminalError: tmux is not installed.
    """
    found = shutil.which("tmux")
    if found is None:
        raise TerminalError(
            "interactive runs need tmux, which is not installed (apt install tmux, brew "
            "install tmux)"
        )
    return found


def tmux_env() -> dict[str, str]:
    """The environment tmux runs in: none of the node's variables (keys among them)
    reach its server, whose environment every pane would otherwise start from."""
    keep = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")
    return {name: os.environ[name] for name in keep if name in os.environ}


def socket_path(log_dir: Path) -> str:
    """The socket of the node's tmux server: `tmux.sock` in its log folder, or where that
    path is too long for a socket, one in a private folder of this user's under the
    temporary directory, named by the log folder's hash (so every process of this
    machine finds the same one)."""
    path = str(log_dir / "tmux.sock")
    if len(path.encode()) <= _SOCKET_MAX:
        return path
    digest = hashlib.sha256(str(log_dir).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"slotline-{os.getuid()}"
    private_dir(folder)
    return str(folder / f"{digest}.sock")


def session_name(log_path: Path) -> str:
    """A session's name, from its log's path `…/TASK_ID/N.log`: `TASK_ID-N` (without `.`
    or `:`, which tmux targets read as separators)."""
    name = f"{log_path.parent.name}-{log_path.stem}"
    return name.replace(".", "-").replace(":", "-")


async def spawn_in_terminal(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    log_path: Path,
    socket: str,
    memory_mb: int | None = None,
    log_max_bytes: int = 50 * 1024 * 1024,
    fence: str = "",
) -> ProcessHandle:
    """Start `argv` under its keeper in a new tmux session (`process.spawn`'s interactive
    twin): its terminal is named in `N.tmux`, its output goes to `log_path`.

    Raises:
        SpawnError: the workspace, the program or tmux is missing, or tmux failed.
    """
    started = await asyncio.to_thread(
        _start, argv, cwd, env, log_path, socket, memory_mb, log_max_bytes, fence
    )
    pid, pid_started = started
    return ProcessHandle(
        pid, pid_started, log_path, log_path.with_suffix(".exit"), teed=teed_path(log_path)
    )


def teed_path(log_path: Path) -> Path:
    """The file `wrap.py --tee` writes once the whole output is in the log."""
    return log_path.with_suffix(".teed")


def _start(
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    log_path: Path,
    socket: str,
    memory_mb: int | None,
    log_max_bytes: int,
    fence: str,
) -> tuple[int, float | None]:
    try:
        tmux_binary()
    except TerminalError as exc:
        raise SpawnError(str(exc)) from None
    check_program(argv, cwd, env)
    private_dir(log_path.parent)
    clear_earlier(log_path)
    for stale in (teed_path(log_path), sidecar(log_path)):
        stale.unlink(missing_ok=True)
    log_path.touch(mode=0o600)
    terminal = Terminal(socket, session_name(log_path))
    env_file = log_path.with_suffix(".env")
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        json.dump(env, file)
    exit_path = log_path.with_suffix(".exit")
    cap = memory_cap(memory_mb, log_path)
    keeper = [
        sys.executable, "-I", "-S", WRAP, "--pane", str(env_file), str(exit_path), str(cap),
        cwd or "", str(log_max_bytes), fence, "--", *argv,
    ]  # fmt: skip
    # tmux runs a pipe-pane command with /bin/sh -c: our own argv, every part quoted.
    teeing = shlex.join(
        [sys.executable, "-I", "-S", WRAP, "--tee", str(log_path), str(log_max_bytes)]
    )
    # One tmux command list: the session and its log are in place before tmux reads
    # anything the command prints. The server, if this starts it, reads slotline's own
    # configuration (`_OPTIONS`), never the user's.
    command = terminal.tmux(
        "new-session", "-d", "-s", terminal.session, "-x", str(COLUMNS), "-y", str(LINES),
        "-P", "-F", "#{pane_pid}", "--", *keeper,
        ";", "pipe-pane", "-O", "-t", terminal.target, "exec " + teeing,
        config=_config(log_path.parent.parent),
    )  # fmt: skip
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=30, check=False, env=tmux_env()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        with contextlib.suppress(OSError):
            env_file.unlink()
        raise SpawnError(f"cannot start tmux: {exc}") from exc
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        with contextlib.suppress(OSError):
            env_file.unlink()
        why = done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}"
        raise SpawnError(f"cannot start a terminal for {argv[0]}: tmux: {why}")
    terminal.save(log_path)
    pid = int(done.stdout.strip().splitlines()[0])
    return pid, process_start_time(pid)
