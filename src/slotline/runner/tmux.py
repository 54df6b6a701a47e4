"""slotline's tmux server and a run's terminal on it: `Terminal` (a socket, a session, the
run's pane), what is typed into it, read from it and attached to it, and the names and
paths it is found by.

tmux is the terminal: each run is one session on a tmux server of slotline's own (a
private socket in the log folder, never the user's default server; `-f /dev/null`, so a
user's ~/.tmux.conf does not change how runs behave). The server outlives the node, so
a node killed with SIGKILL finds its interactive runs going on when it restarts, as it
finds headless ones.

Beside the log `N.log`, `N.tmux` names the run's server and session: what `attach`,
`send` and the dashboard's terminal use, wherever on this machine they run.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from slotline.runner.files import private_dir

# A Unix socket's path is at most 108 bytes (104 on macOS): a longer log folder gets a
# socket in a private folder under the temporary directory, named by the folder's hash.
_SOCKET_MAX = 100


class TerminalError(Exception):
    """A run's terminal could not be reached (tmux missing, the run gone, another machine)."""


class InputOff(TerminalError):
    """The run's pane takes no input now: its run gave its slot back (or is giving it)."""


# What tmux says when the server or the session is gone.
_GONE = ("can't find session", "can't find pane", "no server running", "error connecting")
# How long after the text of a `send` its Enter comes.
ENTER_AFTER = 0.2


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
