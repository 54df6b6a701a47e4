"""The worker server: runs sync Python functions of function tasks in processes of their own.

A node starts one (`python -m slotline.runner.worker`, with the node's `sys.path`) on its
first function run. Per request (one line of JSON on stdin: where the function is
defined, its arguments, the run's files and environment) the server forks a keeper in a
session of its own, which forks the worker that calls the function: the worker's output
goes through the keeper to the attempt's log (capped, as a command's), the keeper writes
the exit status, and the worker writes what the function returned (or the exception's
type and message) to a result file. Forking this server, which has imported the
functions' modules once, costs a millisecond where a new interpreter costs a second.

A function run cannot outlive its node (nothing could collect its result): when the
node stops or dies, the server's stdin closes and it kills every run it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import traceback
from typing import IO, Any

from slotline.runner.functions import (
    PATH_VARIABLE,
    describe_exception,
    encode_result,
    find_function,
    split_arguments,
)
from slotline.runner.wrap import NOT_STARTED, Fence, _pump, _reserve, _write, _write_exit, ended


def serve() -> int:
    """Answer each request with the keeper's pid, or `!` and why nothing was started."""
    # Answers go to a copy of stdout; the real one goes to stderr, so that a module that
    # prints while it is imported cannot garble them.
    with os.fdopen(os.dup(1), "w") as answers:
        os.dup2(2, 1)
        sys.path[:] = json.loads(os.environ.pop(PATH_VARIABLE, "null")) or sys.path
        keepers: set[int] = set()
        _answer(answers, keepers)
    # Our node has gone: the runs it started have no one to report them. A keeper not yet
    # reaped keeps its pid, so the group signalled is still that run's.
    for pid in keepers:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    return 0


def _answer(answers: IO[str], keepers: set[int]) -> None:
    """Answer requests until stdin closes."""
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], 1.0)
        _reap(keepers)
        if not ready:
            continue
        data = os.read(0, 65536)
        if not data:
            return
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            answers.write(_start(json.loads(line), keepers) + "\n")
            answers.flush()


def _reap(keepers: set[int]) -> None:
    for pid in list(keepers):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            keepers.discard(pid)


def _start(request: dict[str, Any], keepers: set[int]) -> str:
    try:
        function = find_function(request["module"], request["qualname"], request.get("main"))
    except Exception as exc:
        where = f"{request['module']}.{request['qualname']}"
        return f"! cannot import {where}: {type(exc).__name__}: {exc}".replace("\n", " ")
    ready, in_session = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(ready)
        os.close(in_session)
        return f"! {exc.strerror}"
    if pid == 0:
        os.close(ready)
        _keep(request, function, in_session)
    os.close(in_session)
    # Answer once the keeper leads its own session: a stop signals the group its pid names.
    os.read(ready, 1)
    os.close(ready)
    keepers.add(pid)
    return str(pid)


def _keep(request: dict[str, Any], function: Any, in_session: int) -> None:
    """In a child of the server: a keeper in a session of its own; never returns."""
    code = 1
    try:
        os.setsid()
        os.close(in_session)  # tells the server
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, max(os.sysconf("SC_OPEN_MAX"), 3))
        os.environ.clear()
        os.environ.update(request["env"])
        _reserve(request["exit"])  # room for the exit status, as a command's keeper
        if request.get("cwd"):
            os.chdir(request["cwd"])
        # Stop signals reach the worker through the group; the keeper stays to write the
        # exit status.
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        fence = Fence(request["fence"], request["exit"]) if request.get("fence") else None
        if fence is not None and fence.lapsed():
            fence.fence(NOT_STARTED)
            os._exit(0)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            _work(request, function, write_end)
        os.close(write_end)
        os.dup2(read_end, 0)
        os.close(read_end)
        tail = request["exit"].rsplit(".", 1)[0] + ".tail"  # beside N.log, as a command's
        status = _pump(0, pid, int(request["log_max"]), tail, fence, request["exit"])
        exit_code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _write_exit(request["exit"], exit_code)
        ended(fence)
        code = 0
    except BaseException:  # the exit file is missing: the run ends without an exit status
        traceback.print_exc()
    finally:
        os._exit(code)


def _work(request: dict[str, Any], function: Any, out: int) -> None:
    """In the keeper's child: call the function, write its outcome; never returns."""
    code = 1
    outcome: dict[str, str] = {}
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        memory_mb = int(request.get("memory_mb") or 0)
        if memory_mb:
            import resource

            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        positional, keywords = split_arguments(function, request["args"])
        value = function(*positional, **keywords)
        outcome = {"result": encode_result(value)}
        code = 0
    except BaseException as exc:  # SystemExit and KeyboardInterrupt fail the run too
        traceback.print_exc()
        outcome = {"error": describe_exception(exc)}
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
            _write(request["result"], json.dumps(outcome))
        finally:
            os._exit(code)


if __name__ == "__main__":
    sys.exit(serve())
