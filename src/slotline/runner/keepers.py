"""The keeper server: one per node process, it forks each command's keeper (`wrap.py`),
so that the node is not the keepers' parent (see `wrap.py` and `process.py`)."""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from slotline.runner.capabilities import CAPS, Capabilities, open_fds

WRAP = str(Path(__file__).with_name("wrap.py"))

log = logging.getLogger("slotline.node")


class KeeperServer:
    """The keeper server of this process, started on first use and again if it died.

    `argv` and `env` start the server: by default wrap.py's (`runner/worker.py` is the
    one for Python functions); it answers each request (a line of JSON) with a pid, in
    the order of the requests. Requests from several threads are sent without waiting
    for the answers before them (a claim that starts eight runs sends eight at once);
    a thread of this process reads the answers and hands each to its request.

    A request the server dies without answering is sent once more, to a new server. If
    it died after forking that request's keeper (killed from outside: it answers what
    it cannot do, `wrap.serve`), that command runs twice; and so may each of the
    requests it had forked beside it, unanswered."""

    def __init__(
        self,
        argv: Sequence[str] = (sys.executable, "-I", "-S", WRAP, "--serve"),
        env: Callable[[], dict[str, str]] = dict,
        caps: Capabilities = CAPS,
    ) -> None:
        self._argv = list(argv)
        self._env = env
        self._caps = caps
        # Held to start or stop the server and to send a request: the order of the
        # requests sent is the order of `_Server.waiting`.
        self._lock = threading.Lock()
        self._server: _Server | None = None
        # A forked copy of this process (which has no reader thread, and may have been
        # forked while another thread held the lock) starts a server of its own.
        me = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _forked(me()))

    @property
    def _pid(self) -> int | None:
        return None if self._server is None else self._server.pid

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
        request = (json.dumps(payload) + "\n").encode()
        for _ in (1, 2):
            answer: Future[str] = Future()
            with self._lock:
                if self._server is None:
                    self._server = _Server.start(self._argv, self._env(), self._caps)
                server = self._server
                server.send(request, answer)
            text = answer.result()
            if text.startswith("!"):
                raise OSError(text[1:].strip())
            if text:
                return int(text)
            with self._lock:  # it died: start another, once
                if self._server is server:
                    server.stop()
                    self._server = None
        raise OSError("the keeper server stopped answering")

    def close(self) -> None:
        with self._lock:
            if self._server is not None:
                self._server.stop()
                self._server = None


def _forked(keepers: KeeperServer | None) -> None:
    """In the child of a fork: forget the parent's server (closing the copies of its
    pipes, so that only the parent keeps its stdin open) and its lock."""
    if keepers is None:
        return
    keepers._lock = threading.Lock()
    if keepers._server is not None:
        keepers._server.forget()
        keepers._server = None


class _Server:
    """One running keeper server: the pipes to it, the requests it has not answered yet
    (oldest first) and the thread that reads its answers. The pipes are bare
    descriptors: a forked copy of the node closes its copies without the locks of
    Python's file objects, which the reader thread may have held at the fork."""

    def __init__(self, pid: int, requests: int, answers: int) -> None:
        self.pid = pid
        self.requests = requests
        self.answers = answers
        self.waiting: deque[Future[str]] = deque()
        # Set once no answer can come (its answers ended, or a request could not be
        # sent): what waits, and what is sent later, gets "".
        self.gone = False
        self._lock = threading.Lock()

    @classmethod
    def start(cls, argv: list[str], env: dict[str, str], caps: Capabilities) -> _Server:
        to_server, requests = os.pipe()
        answers, from_server = os.pipe()
        actions: list[tuple[Any, ...]] = [
            (os.POSIX_SPAWN_DUP2, to_server, 0),
            (os.POSIX_SPAWN_DUP2, from_server, 1),
            # Nothing else of the node: its keepers must not inherit a socket or a pipe.
            *((os.POSIX_SPAWN_CLOSE, fd) for fd in open_fds(caps) if fd > 2),
        ]
        # Out of the node's session (or at least its process group, where posix_spawn
        # cannot start a session): a Ctrl-C in the node's terminal must not reach it.
        detach: dict[str, Any] = {"setsid": True} if caps.spawn_setsid else {"setpgroup": 0}
        try:
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, **detach)
        except BaseException:
            os.close(requests)
            os.close(answers)
            raise
        finally:
            os.close(to_server)
            os.close(from_server)
        server = cls(pid, requests, answers)
        threading.Thread(target=server._read, name="slotline-keepers", daemon=True).start()
        return server

    def send(self, request: bytes, answer: Future[str]) -> None:
        """Send `request` (under the owner's lock, which keeps the order); `answer` gets
        the server's answer, or "" if it died."""
        with self._lock:
            if self.gone:
                answer.set_result("")
                return
            self.waiting.append(answer)
        try:
            done = 0
            while done < len(request):
                done += os.write(self.requests, request[done:])
        except BaseException as exc:
            # Not sent whole: this request fails (a part of a line stays in the pipe, so
            # nothing more is sent on it). Those sent before it still get the answers
            # the server wrote before it died: the reader hands them out.
            with self._lock:
                self.gone = True
                if self.waiting and self.waiting[-1] is answer:
                    self.waiting.pop()
            answer.set_result("")
            if not isinstance(exc, OSError):
                raise

    def _read(self) -> None:
        """The reader thread: hand each answer to the oldest request waiting; at the
        end of the answers (or on any failure), "" to every request still waiting."""
        pending = b""
        try:
            while data := os.read(self.answers, 4096):
                *lines, pending = (pending + data).split(b"\n")
                for line in lines:
                    with self._lock:
                        answer = self.waiting.popleft() if self.waiting else None
                    if answer is not None:
                        answer.set_result(line.decode(errors="replace").strip())
        except OSError:
            pass
        except BaseException:
            log.exception("reading the keeper server's answers failed")
        finally:
            self._end()
            fd, self.answers = self.answers, -1
            os.close(fd)

    def _end(self) -> None:
        """No answer will come: every request waiting gets "" (and so does any sent later)."""
        with self._lock:
            self.gone = True
            waiting, self.waiting = list(self.waiting), deque()
        for answer in waiting:
            answer.set_result("")

    def stop(self) -> None:
        """Close its requests: it ends (the keepers it forked live on), and so does the
        reader. It is reaped if it has ended, never waited for (a wedged server must not
        hold up a node's exit)."""
        fd, self.requests = self.requests, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, os.WNOHANG)

    def forget(self) -> None:
        """In a forked copy of its owner (with no reader thread): close the copies of its
        pipes (a pipe the reader closed already is skipped: its number may be another's
        by now)."""
        for fd in (self.requests, self.answers):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)


KEEPERS = KeeperServer()
# Closing its stdin at exit ends the server (keepers live on); it would end anyway.
atexit.register(KEEPERS.close)
