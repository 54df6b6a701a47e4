"""The keeper server: one per node process, it forks each command's keeper (`wrap.py`),
so that the node is not the keepers' parent (see `wrap.py` and `process.py`)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from slotline.runner.capabilities import CAPS, Capabilities, open_fds

WRAP = str(Path(__file__).with_name("wrap.py"))


class KeeperServer:
    """The keeper server of this process, started on first use and again if it died.

    `argv` and `env` start the server: by default wrap.py's (`runner/worker.py` is the
    one for Python functions); it answers each request (a line of JSON) with a pid."""

    def __init__(
        self,
        argv: Sequence[str] = (sys.executable, "-I", "-S", WRAP, "--serve"),
        env: Callable[[], dict[str, str]] = dict,
        caps: Capabilities = CAPS,
    ) -> None:
        self._argv = list(argv)
        self._env = env
        self._caps = caps
        self._lock = threading.Lock()
        self._owner = os.getpid()
        self._pid: int | None = None
        self._requests: Any = None
        self._answers: Any = None

    def start_keeper(self, keeper_argv: list[str], env: dict[str, str], log_path: Path) -> int:
        """Fork a keeper running `wrap.main(keeper_argv)`; returns its pid (blocking: call
        it from a worker thread).

        Raises:
            OSError: the server could not be started, or could not fork the keeper.
        """
        return self.request({"argv": keeper_argv, "env": env, "log": str(log_path)})

    def request(self, payload: dict[str, Any]) -> int:
        """Send one request; returns the pid of the process the server forked for it
        (blocking: call it from a worker thread).

        Raises:
            OSError: the server could not be started, or refused the request (its reason).
        """
        request = json.dumps(payload)
        with self._lock:
            if self._owner != os.getpid():  # a forked copy of the node: not its server
                self._close_pipes()
                self._pid = None
                self._owner = os.getpid()
            for attempt in (1, 2):
                if self._requests is None:
                    self._start()
                try:
                    self._requests.write(request + "\n")
                    self._requests.flush()
                    answer = self._answers.readline()
                except OSError:
                    answer = ""
                if answer.startswith("!"):
                    raise OSError(answer[1:].strip())
                if answer:
                    return int(answer)
                self._stop()  # it died: start another, once
                if attempt == 2:
                    raise OSError("the keeper server stopped answering")
        raise AssertionError("unreachable")

    def _start(self) -> None:
        to_server, requests = os.pipe()
        answers, from_server = os.pipe()
        actions: list[tuple[Any, ...]] = [
            (os.POSIX_SPAWN_DUP2, to_server, 0),
            (os.POSIX_SPAWN_DUP2, from_server, 1),
            # Nothing else of the node: its keepers must not inherit a socket or a pipe.
            *((os.POSIX_SPAWN_CLOSE, fd) for fd in open_fds(self._caps) if fd > 2),
        ]
        # Out of the node's session (or at least its process group, where posix_spawn
        # cannot start a session): a Ctrl-C in the node's terminal must not reach it.
        detach: dict[str, Any] = {"setsid": True} if self._caps.spawn_setsid else {"setpgroup": 0}
        try:
            self._pid = os.posix_spawn(
                self._argv[0], self._argv, self._env(), file_actions=actions, **detach
            )
        finally:
            os.close(to_server)
            os.close(from_server)
        self._requests = os.fdopen(requests, "w")
        self._answers = os.fdopen(answers, "r")

    def _close_pipes(self) -> None:
        for stream in (self._requests, self._answers):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._requests = self._answers = None

    def _stop(self) -> None:
        self._close_pipes()
        if self._pid is not None:
            # Closing its stdin ends it; reap it if it has ended, never wait for it (a
            # wedged server must not hold up a node's exit).
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, os.WNOHANG)
            self._pid = None

    def close(self) -> None:
        with self._lock:
            self._stop()


KEEPERS = KeeperServer()
# Closing its stdin at exit ends the server (keepers live on); it would end anyway.
atexit.register(KEEPERS.close)
