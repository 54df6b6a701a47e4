"""Python functions as tasks, on the node's side: arguments as JSON, results as JSON, and
sync functions run in worker processes (`runner/worker.py`), where a timeout or a stop
request really stops them.

A function's arguments are stored by parameter name (`bind_arguments` at submit,
`split_arguments` to call), so a task shows them as `{"path": "notes.md"}` and a function
registered with `Node(callables=…)` is called with `function(**args)` as before.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import inspect
import json
import os
import runpy
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotline.bounds import MAX_RESULT_BYTES
from slotline.errors import InvalidInput
from slotline.runner.capabilities import memory_cap
from slotline.runner.files import private_dir
from slotline.runner.keepers import KeeperServer
from slotline.runner.process import Outcome, ProcessHandle, process_start_time

# How the node's sys.path (its app's folder, a virtualenv's paths) reaches the worker server.
PATH_VARIABLE = "SLOTLINE_WORKER_PATH"


@dataclass(frozen=True, slots=True)
class FunctionRef:
    """A sync function run in a worker process, which finds it where it is defined."""

    module: str
    qualname: str
    # A function of the script run as __main__: that script's path.
    main: str | None = None

    @classmethod
    def of(cls, function: Callable[..., Any]) -> FunctionRef:
        """Where a worker process finds `function`.

        Raises:
            InvalidInput: it is not defined at the top level of a module or script.
        """
        module = getattr(function, "__module__", None)
        qualname = getattr(function, "__qualname__", None)
        where = f"{module}.{qualname}"
        if not module or not qualname or "<" in qualname:
            raise InvalidInput(
                f"{where} cannot run in a worker process, which imports it by name: define "
                "it at the top level of a module, or run it in a thread (mode='thread')"
            )
        main = None
        if module == "__main__":
            main = getattr(sys.modules["__main__"], "__file__", None)
            if main is None:
                raise InvalidInput(
                    f"{where} is defined in an interactive session, which a worker process "
                    "cannot import: put it in a module, or use mode='thread'"
                )
            main = os.path.abspath(main)
        return cls(module, qualname, main)


_scripts: dict[str, dict[str, Any]] = {}


def find_function(module: str, qualname: str, main: str | None = None) -> Callable[..., Any]:
    """The function at `module`.`qualname` (in a worker process), importing its module.

    A script's functions (`__main__`) are found by running the script as `__mp_main__`, as
    multiprocessing does, so that its `if __name__ == "__main__":` part does not run.
    """
    found: Any
    if module == "__main__" and main is not None:
        if main not in _scripts:
            _scripts[main] = runpy.run_path(main, run_name="__mp_main__")
        first, *rest = qualname.split(".")
        found = _scripts[main][first]
    else:
        found = importlib.import_module(module)
        rest = qualname.split(".")
    for part in rest:
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"{module}.{qualname} is not callable")
    return found  # type: ignore[no-any-return]


def bind_arguments(
    function: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The arguments of a call `function(*args, **kwargs)` by parameter name, as stored.

    Keyword arguments caught by `**kwargs` are stored as they are named; those caught by
    `*args`, and positional-only ones, under their parameter's name.

    Raises:
        InvalidInput: the call does not fit the signature, or an argument is not JSON
            (the message names it).
    """
    signature = inspect.signature(function)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise InvalidInput(f"{name}(): {exc}") from None
    stored: dict[str, Any] = {}
    for param, value in bound.arguments.items():
        kind = signature.parameters[param].kind
        if kind is inspect.Parameter.VAR_KEYWORD:
            for key, item in value.items():
                if key in stored or key in signature.parameters:
                    raise InvalidInput(
                        f"{name}(): keyword argument {key!r} has the name of a parameter"
                    )
                stored[key] = _json_value(name, key, item)
        else:
            stored[param] = _json_value(name, param, value)
    return stored


def _json_value(name: str, param: str, value: Any) -> Any:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(
            f"argument {param!r} of {name} is not JSON ({exc}); arguments are stored as JSON, "
            "never pickled: pass strings, numbers, lists and dicts"
        ) from None
    return json.loads(text)


def split_arguments(
    function: Callable[..., Any], args: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The positional and keyword arguments to call `function` with stored `args`."""
    if not args:  # nothing to place (and reading a signature costs more than the call)
        return [], {}
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read: keywords, as given
        return [], dict(args)
    keywords = dict(args)
    positional: list[Any] = []
    # Before a non-empty *args, every parameter goes by position.
    varargs = any(
        p.kind is inspect.Parameter.VAR_POSITIONAL and keywords.get(p.name) for p in parameters
    )
    for param in parameters:
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            positional.extend(keywords.pop(param.name, None) or ())
            break
        by_position = param.kind is inspect.Parameter.POSITIONAL_ONLY or (
            varargs and param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        if not by_position or param.name not in keywords:
            break
        positional.append(keywords.pop(param.name))
    return positional, keywords


def encode_result(value: Any) -> str:
    """A function's return value as the JSON kept with its task.

    Raises:
        TypeError: the value is not JSON (or holds NaN or an infinity).
        ValueError: the JSON is larger than MAX_RESULT_BYTES.
    """
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the function's result is not JSON: {exc}") from None
    size = len(text.encode())
    if size > MAX_RESULT_BYTES:
        raise ValueError(
            f"the function's result is {size} bytes of JSON; at most {MAX_RESULT_BYTES} are kept"
        )
    return text


def describe_exception(exc: BaseException) -> str:
    """`ValueError: boom`: the failure reason of an attempt whose function raised."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _worker_env() -> dict[str, str]:
    return {**os.environ, PATH_VARIABLE: json.dumps(sys.path)}


WORKERS = KeeperServer([sys.executable, "-m", "slotline.runner.worker"], _worker_env)
# Closing its stdin at exit ends the server, and with it any run left.
atexit.register(WORKERS.close)


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """What a worker process needs for one attempt besides the function and arguments."""

    env: dict[str, str]
    log_path: Path
    timeout: float | None
    kill_grace: float
    log_max_bytes: int
    memory_mb: int | None = None
    cwd: str | None = None
    # Told the process once it runs (the node samples its CPU and memory).
    started: Callable[[ProcessHandle], None] | None = None
    # The keeper's FENCE argument (`slotline.fencing.Fence.spec`), if any.
    fence: str = ""


async def run_in_process(ref: FunctionRef, args: dict[str, Any], run: ProcessRun) -> Outcome:
    """Run the function in a worker process until it returns, raises, times out, or this
    coroutine is cancelled (a stop request): then its process group gets TERM, and KILL
    after the grace period, and the outcome is known only once nothing of it runs."""
    exit_path = run.log_path.with_suffix(".fexit")
    result_path = run.log_path.with_suffix(".result")
    request = {
        "module": ref.module,
        "qualname": ref.qualname,
        "main": ref.main,
        "args": args,
        "env": run.env,
        "cwd": run.cwd,
        "log": str(run.log_path),
        "exit": str(exit_path),
        "result": str(result_path),
        "log_max": run.log_max_bytes,
        "memory_mb": run.memory_mb,
        "fence": run.fence,
    }
    # Off the loop: making the attempt's folder costs a millisecond or more, and the first
    # run of a process starts the worker server.
    starting = asyncio.ensure_future(
        asyncio.to_thread(
            _start,
            request,
            run.log_path.parent,
            exit_path,
            result_path,
            run.log_path.with_suffix(".fenced"),
        )
    )
    cancelled = False
    while not starting.done():
        try:
            await asyncio.wait([starting])
        except asyncio.CancelledError:
            # Stopped while the worker starts: it starts regardless (the thread goes
            # on), so wait for it and stop it then, never leaving it unsupervised.
            cancelled = True
    try:
        pid = starting.result()
    except OSError as exc:
        if cancelled:
            raise asyncio.CancelledError from None
        return Outcome(None, f"cannot start the function: {exc.strerror or exc}")
    handle = ProcessHandle(pid, process_start_time(pid), run.log_path, exit_path)
    if run.started is not None:
        run.started(handle)
    if cancelled:
        await handle.stop("stopped by request", run.kill_grace)
        await handle.wait()
        raise asyncio.CancelledError
    waiting = asyncio.ensure_future(handle.wait())
    try:
        ended = await asyncio.wait_for(asyncio.shield(waiting), run.timeout)
    except TimeoutError:
        await handle.stop(f"timed out after {run.timeout:g}s", run.kill_grace)
        ended = await waiting
    except asyncio.CancelledError:
        await handle.stop("stopped by request", run.kill_grace)
        await waiting
        raise
    return _outcome(handle, ended, result_path)


def _start(request: dict[str, Any], folder: Path, *stale: Path) -> int:
    private_dir(folder)
    for path in stale:
        path.unlink(missing_ok=True)
    request["memory_mb"] = memory_cap(request["memory_mb"], Path(request["log"]))
    return WORKERS.request(request)


def _outcome(handle: ProcessHandle, ended: Outcome, result_path: Path) -> Outcome:
    """The run's outcome: what the function returned or raised, unless it was stopped or
    died before saying (then how its process ended)."""
    try:
        said = json.loads(result_path.read_text())
    except (OSError, ValueError):
        said = {}
    with contextlib.suppress(OSError):
        result_path.unlink()
    if handle.stop_reason is not None or ended.fenced:
        return ended  # stopped (a timeout, its keeper's fence): that is the reason
    if "result" in said:
        return Outcome(0, None, said["result"])
    if "error" in said:
        return Outcome(1, said["error"])
    return ended
