"""What the tests of interactive agent runs share: a HOME in which the real Claude Code
starts straight into its session, and a `Pane` to read and type into a tmux terminal.

Claude Code run interactively (without `-p`) in a fresh HOME first shows screens that
only a person answers, and a run would wait on them for ever. What Claude Code 2.1.332
showed in a tmux pane, one after the other, and what in ~/.claude.json skips each (as
it is written there once a person answered it):
- its onboarding: a theme choice, then "Security notes … Press Enter to continue" (and,
  where api.anthropic.com cannot be reached, "Unable to connect to Anthropic services",
  after which it exits 1): `hasCompletedOnboarding: true`;
- "Accessing workspace: … Is this a project you created or one you trust?", with
  "No, exit" chosen: `projects[<folder>].hasTrustDialogAccepted: true`, for the folder
  Claude starts in, a folder above it up to its git repository's top, or that
  repository itself for a git worktree of it (so trusting the user's repository covers
  the worktrees slotline runs each task in);
- "Detected a custom API key in your environment … Do you want to use this API key?",
  with "No (recommended)" chosen: the key's last 20 characters in
  `customApiKeyResponses.approved` (the whole key does not match).
A user who has used Claude Code in the repository with that key has all three.

`Pane` drives one tmux session the way a person at it would (and as slotline's `send`
types: the text, then Enter). The tests make their own tmux server here; slotline's
runs name theirs in the `N.tmux` file beside the attempt's log (`Pane.of`).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from waiting import until

from .conftest import IN_CI, RUN_TIMEOUT

T = TypeVar("T")

# The size of a run's terminal before anyone attaches (slotline's, too).
COLUMNS, LINES = 120, 40


def seed_claude_home(home: Path, repository: Path, api_key: str) -> None:
    """Write `home`/.claude.json as a user's who has used Claude Code before: onboarded,
    `repository` trusted, and `api_key` (from ANTHROPIC_API_KEY) approved."""
    config = {
        "hasCompletedOnboarding": True,
        "projects": {str(repository.resolve()): {"hasTrustDialogAccepted": True}},
        "customApiKeyResponses": {"approved": [api_key[-20:]], "rejected": []},
    }
    (home / ".claude.json").write_text(json.dumps(config, indent=2) + "\n")


def require_tmux() -> str:
    """tmux's path: skip on a laptop without it, fail in CI (`.ci/run` installs it)."""
    found = shutil.which("tmux")
    if found is not None:
        return found
    if IN_CI:
        pytest.fail("tmux is required in CI (.ci/run installs it)")
    pytest.skip("tmux is not installed")


class Pane:
    """The one pane of a tmux session: what it shows, what it printed, and keys typed
    into it."""

    def __init__(
        self,
        socket: str,
        session: str,
        output: Path | None = None,
        exit_file: Path | None = None,
    ) -> None:
        self.socket = socket
        self.session = session
        self.output = output  # a file tmux copies what the pane prints to
        self.exit_file = exit_file  # where its command's exit status is written

    @classmethod
    def of(cls, log_path: Path) -> Pane:
        """The pane of the interactive run whose log is `log_path` (what it printed),
        from the `N.tmux` file beside it."""
        data = json.loads(log_path.with_suffix(".tmux").read_text())
        return cls(str(data["socket"]), str(data["session"]), output=log_path)

    def tmux(self, *args: str) -> str:
        """A tmux command on the pane's server; its output."""
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"tmux {' '.join(args)}: {done.stderr.strip()}"
        return done.stdout

    @property
    def target(self) -> str:
        # `=NAME:` is the session of that exact name (not a prefix), its current pane.
        return f"={self.session}:"

    def screen(self) -> str:
        """The text the pane shows now (no colours), one line per row."""
        return self.tmux("capture-pane", "-p", "-t", self.target)

    def wait_for(self, text: str, timeout: float = RUN_TIMEOUT) -> str:
        """The screen, once it shows `text`."""
        return self.wait_until(lambda screen: text in screen, f"{text!r} on the screen", timeout)

    def wait_until(
        self, condition: Callable[[str], bool], what: str, timeout: float = RUN_TIMEOUT
    ) -> str:
        """The screen, once `condition` holds of it (`what` names it in a failure, with
        the screen as it was then)."""
        return self._until(lambda: condition(screen := self.screen()) and screen, what, timeout)

    def quiet(self, seconds: float, timeout: float = RUN_TIMEOUT) -> float:
        """Once the pane has printed nothing for `seconds`, how long it printed
        (anything: a repaint too) since this was called."""
        if self.output is None:
            raise ValueError(f"{self.session}: no copy of its output to watch")
        path = self.output
        start = time.monotonic()
        last = [path.stat().st_size, start]  # its size, and when it last changed

        def settled() -> bool:
            size, now = path.stat().st_size, time.monotonic()
            if size != last[0]:
                last[:] = [size, now]
            return now - last[1] >= seconds

        self._until(settled, f"{self.session} quiet for {seconds:g}s", timeout)
        return last[1] - start

    def type(self, text: str) -> None:
        """Type `text` literally, then Enter: what `slotline send` does."""
        self.tmux("send-keys", "-t", self.target, "-l", "--", text,
                  ";", "send-keys", "-t", self.target, "Enter")  # fmt: skip

    def keys(self, *names: str) -> None:
        """Press keys by tmux's names (`Escape`, `Down`, `C-c`)."""
        self.tmux("send-keys", "-t", self.target, *names)

    def exited(self, timeout: float = RUN_TIMEOUT) -> int:
        """The exit status of the pane's command (started by `TmuxServer.start`), once
        it has exited."""
        if self.exit_file is None:
            raise ValueError(f"{self.session}: no exit file to read its status from")
        path = self.exit_file
        found = self._until(
            lambda: path.exists() and path.read_text(),
            f"the command of {self.session} exiting", timeout,
        )  # fmt: skip
        return int(found)

    def _until(self, predicate: Callable[[], T], what: str, timeout: float) -> T:
        try:
            return until(predicate, timeout=timeout, what=what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the screen:\n{self.screen()}") from None


# The first process of a test's pane: it runs the command, waits for it, and writes its
# exit status to a file. tmux 3.3 does not always reap a pane's process (in about one run
# in ten here, the process that exited stays a zombie, its status unread, until another
# SIGCHLD reaches the server), so `#{pane_dead_status}` cannot be waited on; slotline's
# keeper (`wrap.py --pane`) writes its `N.exit` for the same reason.
KEEPER = (
    "import subprocess, sys\n"
    "code = subprocess.call(sys.argv[2:])\n"
    "with open(sys.argv[1], 'w') as file:\n"
    "    file.write(str(code))\n"
)


class TmuxServer:
    """A tmux server of the test's own, on a private socket, with its own configuration
    (not ~/.tmux.conf): its sessions run commands in a terminal of `COLUMNS` by `LINES`,
    tmux copies what each prints to `SESSION.log` (as slotline's runs to their log),
    and a pane whose command exited stays, showing what it printed last."""

    CONFIG = "set-option -wg remain-on-exit on\n"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.socket = str(folder / "tmux.sock")
        self.config = folder / "tmux.conf"
        self.config.write_text(self.CONFIG)

    def start(self, session: str, argv: list[str], cwd: Path, env: dict[str, str]) -> Pane:
        """Run `argv` in a new session `session`, in `cwd`, with exactly `env`."""
        exit_file = self.folder / f"{session}.exit"
        output = self.folder / f"{session}.log"
        output.touch()
        command = [
            "tmux", "-S", self.socket, "-f", str(self.config),
            "new-session", "-d", "-s", session, "-x", str(COLUMNS), "-y", str(LINES),
            "-c", str(cwd), "--", sys.executable, "-c", KEEPER, str(exit_file), *argv,
            ";", "pipe-pane", "-o", "-t", f"={session}:", f"cat >> {shlex.quote(str(output))}",
        ]  # fmt: skip
        env = {k: v for k, v in env.items() if not k.startswith("TMUX")}
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=10, check=False
        )
        assert done.returncode == 0, done.stderr
        return Pane(self.socket, session, output, exit_file)

    def kill(self) -> None:
        """Stop the server and every session on it."""
        subprocess.run(
            ["tmux", "-S", self.socket, "kill-server"],
            capture_output=True, timeout=10, check=False,
        )  # fmt: skip


@pytest.fixture
def tmux_server() -> Iterator[TmuxServer]:
    """The test's tmux server (killed at its end). Its socket is in a folder of its own
    under the temporary directory: a Unix socket's path must stay under 108 bytes, which
    a test's `tmp_path` may not."""
    require_tmux()
    folder = Path(tempfile.mkdtemp(prefix="slotline-tmux-"))
    server = TmuxServer(folder)
    try:
        yield server
    finally:
        server.kill()
        shutil.rmtree(folder, ignore_errors=True)
