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
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
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
    # An agent's TUI that asks for focus events gets them (Claude Code otherwise prints
    # a notice about it, output that would end a quiet spell).
    ("focus-events", "on"),
)


class NoSlot(InvalidTransition):
    """A run that gave its slot back cannot take one again now: `limit` says which limit
    keeps it out."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class TerminalError(Exception):
    """A run's terminal could not be reached (tmux missing, the run gone, another machine)."""


class InputOff(TerminalError):
    """The run's pane takes no input now: its run gave its slot back (or is giving it)."""


# What tmux says when the server or the session is gone.
_GONE = ("can't find session", "can't find pane", "no server running", "error connecting")
# How long after the text of a `send` its Enter comes, and how long a `send` that finds
# the run's input off (its slot being given back) tries again.
ENTER_AFTER = 0.2
INPUT_OFF_PATIENCE = 5.0


@dataclass(frozen=True, slots=True)
class Terminal:
    """Where an interactive run's terminal is: a tmux server's socket, a session on it,
    and the run's pane in it (tmux's `%N` id: what is typed, read and blocked is aimed at
    that pane, not at whichever one a person attached made active by splitting)."""

    socket: str
    session: str
    pane: str = ""

    def tmux(self, *args: str, config: str = os.devnull) -> list[str]:
        """The argv of tmux commands on this terminal's server (`config`: what the
        server reads if this starts it); a `;` alone separates two commands. tmux reads
        any other argument that ends in `;` as the end of a command: its `;` is escaped
        (`tmux_arg`). Only slotline's own words and paths are arguments here: what a run
        types or runs goes through a buffer or a file."""
        words = [arg if arg == ";" else tmux_arg(arg) for arg in args]
        return [tmux_binary(), "-S", self.socket, "-f", config, *words]

    def save(self, log_path: Path) -> None:
        """Write `N.tmux` beside the run's log `N.log`."""
        text = json.dumps({"socket": self.socket, "session": self.session, "pane": self.pane})
        path = sidecar(log_path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text + "\n")

    @classmethod
    def of(cls, log_path: str | Path | None) -> Terminal | None:
        """The terminal of the run whose log is `log_path`, if it is an interactive run
        of this machine (None otherwise)."""
        if not log_path:
            return None
        try:
            data = json.loads(sidecar(Path(log_path)).read_text())
            return cls(str(data["socket"]), str(data["session"]), str(data.get("pane", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def alive(self) -> bool:
        """Whether the session still exists (its run has not ended)."""
        try:
            self._run(["has-session", "-t", self.target])
        except TerminalError:
            return False
        return True

    @property
    def target(self) -> str:
        """The session as a tmux target: `=NAME:` matches that name exactly, never a
        prefix."""
        return f"={self.session}:"

    @property
    def pane_target(self) -> str:
        return self.pane or self.target

    def send(self, text: str, enter: bool = True, enter_after: float = ENTER_AFTER) -> None:
        """Type `text` into the run's pane as it is: written to it from a tmux buffer, as
        keys would be (no key names, no length limit of tmux's command line, no
        bracketed paste: a digit that chooses in an agent's menu still chooses; a newline
        is Enter, as typed), then Enter `enter_after` seconds later (an agent's TUI takes
        an Enter that comes with a burst of text as part of a paste, not as its submit).

        Raises:
            InputOff: the pane takes no input (its run gave its slot back); nothing typed.
            TerminalError: the session is gone or tmux failed.
        """
        pane = self.pane_target
        if text:
            name = f"slotline-{secrets.token_hex(8)}"
            self._run(["load-buffer", "-b", name, "-"], stdin=text)
            paste = f"paste-buffer -d -b {name} -t {pane}"
            if self._unless_input_off(paste) == "off":
                self._run(["delete-buffer", "-b", name])
                raise InputOff("its terminal takes no input now")
            if not enter:
                return
            time.sleep(enter_after)
        if enter and self._unless_input_off(f"send-keys -t {pane} Enter") == "off":
            raise InputOff("its terminal takes no input now")

    def _unless_input_off(self, command: str) -> str:
        """Run `command` (tmux's syntax) unless the pane takes no input: then "off". One
        tmux command, so that no release comes between the look and the keys."""
        pane = self.pane_target
        said = self._run(
            ["if-shell", "-F", "-t", pane, "#{pane_input_off}", "display-message -p off", command]
        )
        return said.strip()

    def allow_input(self, allowed: bool) -> None:
        """Let what is typed reach the run (True), or drop it (False: a run that gave its
        slot back takes no input until it holds one again)."""
        self._run(["select-pane", "-t", self.pane_target, "-e" if allowed else "-d"])

    def writers(self) -> int:
        """How many clients attached to the session may type into it."""
        listed = self._run(["list-clients", "-t", self.target, "-F", "#{client_readonly}"])
        return sum(1 for line in listed.split() if line.strip() == "0")

    def screen(self) -> str:
        """What the terminal shows now, as plain text (tmux's `capture-pane`)."""
        return self._run(["capture-pane", "-p", "-t", self.pane_target])

    def _run(self, args: list[str], stdin: str | None = None) -> str:
        try:
            done = subprocess.run(
                self.tmux(*args),
                capture_output=True,
                text=True,
                input=stdin,
                timeout=10,
                check=False,
                env=tmux_env(),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TerminalError(f"tmux failed: {exc}") from exc
        if done.returncode != 0:
            why = done.stderr.strip() or f"tmux exited {done.returncode}"
            if any(gone in why for gone in _GONE):
                raise TerminalError("its terminal is gone: the run has ended or is ending")
            raise TerminalError(why)
        return done.stdout

    def attach_argv(self, read_only: bool = False) -> list[str]:
        """The argv that attaches the caller's terminal to the run (`-r`: watch only; a
        watcher's terminal does not resize the run's either, so watching never makes
        the run draw its screen again)."""
        watch = ["-r", "-f", "ignore-size"] if read_only else []
        return self.tmux("attach-session", *watch, "-t", self.target)


def tmux_arg(arg: str) -> str:
    """`arg` as tmux reads it back whole: one that ends in `;` would end a command (and
    what follows would run as tmux commands), so that `;` is escaped."""
    return arg[:-1] + "\\;" if arg.endswith(";") else arg


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
    if not text and not enter:
        return  # nothing to type
    terminal = terminal_of(task)
    deadline = time.monotonic() + INPUT_OFF_PATIENCE
    try:
        while True:
            if task.slot_released is not None:
                retake(task, terminal, store)
            try:
                terminal.send(text, enter)
                return
            except InputOff:
                # Its node is giving its slot back (input goes off first): once the
                # store says so, take one again; if it does not, input comes back.
                if store is None or time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)
            task = store.get(task.id)
            terminal = terminal_of(task)
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
    machine finds the same one).

    Raises:
        TerminalError: that folder is not this user's own, private one (as tmux refuses
            for its own folder there): another user could serve the runs' terminals.
    """
    path = str(log_dir / "tmux.sock")
    if len(path.encode()) <= _SOCKET_MAX:
        return path
    digest = hashlib.sha256(str(log_dir).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"slotline-{os.getuid()}"
    private_dir(folder)
    info = folder.lstat()
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise TerminalError(f"{folder} is not a private folder of this user's: no terminal there")
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
