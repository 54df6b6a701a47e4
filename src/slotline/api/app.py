"""App and @app.task: Python functions as tasks, submitted from anywhere and run by the
stock node (`slotline serve --app MODULE:APP`).

Example (`agents.py`):
    import slotline

    app = slotline.App("slotline.db")

    @app.task(timeout=600, max_attempts=2)
    def review(path: str) -> dict[str, int]:
        return {"issues": 0}

    # elsewhere, with `slotline serve --app agents:app` running:
    task = review.submit("src/slotline/api/app.py")
    print(task.result(timeout=900))
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar, overload

from slotline.errors import InvalidInput
from slotline.models import Status, Task
from slotline.runner.functions import FunctionRef, bind_arguments

if TYPE_CHECKING:
    from slotline.api.queue import Queue
    from slotline.api.sync import SyncQueue
    from slotline.runner.callable import Entry

P = ParamSpec("P")
R = TypeVar("R")

Mode = Literal["process", "thread"]
# What `@app.task(...)` and `.options(...)` may set on the tasks of a function.
TASK_FIELDS = frozenset(
    {
        "priority", "timeout", "max_attempts", "agent", "expected_duration", "title",
        "workspace", "user", "labels", "env", "queue_ttl", "backoff", "memory_mb",
        "parent_id", "hold", "depends_on",
    }
)  # fmt: skip


class App:
    """Python functions declared as tasks of one store.

    Args:
        store: the store URL (a file path, sqlite:///path, postgresql://…); None: the
            CLI's, `$SLOTLINE_STORE`, else the `store:` of `config`, else the default
            SQLite file. Opened on first use, so importing the module that declares the
            app (as the node does) opens nothing.
        config: a slotline.yaml whose `store:` is used when `store` is None.
    """

    def __init__(self, store: str | Path | None = None, config: str | Path | None = None) -> None:
        self.store_url = store
        self.config = config
        self.functions: dict[str, AppFunction[Any, Any]] = {}
        self._queue: Queue | None = None
        self._sync: SyncQueue | None = None

    @overload
    def task(self, function: Callable[P, R], /) -> AppFunction[P, R]: ...
    @overload
    def task(
        self,
        function: None = None,
        /,
        *,
        name: str | None = None,
        mode: Mode = "process",
        **defaults: Any,
    ) -> Callable[[Callable[P, R]], AppFunction[P, R]]: ...
    def task(
        self,
        function: Callable[P, R] | None = None,
        /,
        *,
        name: str | None = None,
        mode: Mode = "process",
        **defaults: Any,
    ) -> AppFunction[P, R] | Callable[[Callable[P, R]], AppFunction[P, R]]:
        """Declare a function as a task: `@app.task` or `@app.task(name=…, priority=…,
        timeout=…, max_attempts=…, agent=…, expected_duration=…)`.

        Args:
            name: the task's function name (default: `module.qualname`).
            mode: how a sync function runs on the node: "process" (default: a worker
                process, which a timeout, cancel or terminate stops at once) or "thread"
                (in the node; it cannot be interrupted, so its attempt and slot last
                until it returns). Async functions run on the node's event loop.
            **defaults: task fields for every submit of it (see `TASK_FIELDS`).

        Raises:
            InvalidInput: a name is taken, a field unknown, or a process-mode function
                is not importable by name (defined inside another function).
        """

        def declare(target: Callable[P, R]) -> AppFunction[P, R]:
            declared = AppFunction(self, target, name, mode, _fields(defaults))
            if declared.name in self.functions:
                raise InvalidInput(f"a task named {declared.name!r} is already declared")
            self.functions[declared.name] = declared
            return declared

        return declare if function is None else declare(function)

    @property
    def queue(self) -> Queue:
        """The async API on the app's store (opened on first use)."""
        if self._queue is None:
            from slotline.api.queue import open_queue

            url = self.store_url or os.environ.get("SLOTLINE_STORE") or None
            if url is None and self.config is not None:
                from slotline.config.file import load_config

                url = load_config(self.config).store
            self._queue = open_queue(url)
        return self._queue

    @property
    def sync(self) -> SyncQueue:
        """The sync API on the same queue (one implementation: `Queue`'s coroutines)."""
        if self._sync is None:
            from slotline.api.sync import SyncQueue

            self._sync = SyncQueue(self.queue)
        return self._sync

    def entries(self) -> dict[str, Entry]:
        """What a node runs under each name: the function, or where a worker finds it."""
        return {name: declared.entry() for name, declared in self.functions.items()}

    def close(self) -> None:
        """Close the store (and the sync API's loop)."""
        if self._sync is not None:
            self._sync.close()
        elif self._queue is not None:
            self._queue.store.close()
        self._queue = self._sync = None


class AppFunction(Generic[P, R]):
    """A function declared with `@app.task`. Calling it runs it here, as a plain call;
    `submit` (or `await asubmit`) queues it as a task and returns a `TaskHandle`."""

    def __init__(
        self,
        app: App,
        function: Callable[P, R],
        name: str | None,
        mode: Mode,
        defaults: dict[str, Any],
    ) -> None:
        if mode not in ("process", "thread"):
            raise InvalidInput(f"mode must be 'process' or 'thread', not {mode!r}")
        self.app = app
        self.function = function
        self.name = name or f"{function.__module__}.{function.__qualname__}"
        self.is_async = inspect.iscoroutinefunction(function)
        self.mode: Mode = mode
        self.defaults = defaults
        # Checked now, not when a node first runs it: a worker imports it by name.
        self._ref = None if self.is_async or mode == "thread" else FunctionRef.of(function)
        self.__doc__ = function.__doc__
        self.__name__ = getattr(function, "__name__", self.name)
        self.__qualname__ = getattr(function, "__qualname__", self.name)
        self.__module__ = function.__module__
        self.__wrapped__ = function

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<slotline task {self.name}>"

    def entry(self) -> Entry:
        return self.function if self._ref is None else self._ref

    def options(self, **fields: Any) -> Options[P, R]:
        """These task fields for the next submit: `f.options(priority="high",
        after=[other], hold=True).submit(...)`; `after` takes tasks or ids to wait for."""
        return Options(self, {**self.defaults, **_fields(fields)})

    def spec(self, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        """The task `submit` would create, as a spec for `Queue.submit_many`."""
        return Options(self, self.defaults).spec(*args, **kwargs)

    def submit(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle:
        """Queue a call; returns at once with the task (see `TaskHandle`).

        Raises:
            InvalidInput: the arguments do not fit the function, or one is not JSON
                (the message names it); nothing is created.
        """
        return Options(self, self.defaults).submit(*args, **kwargs)

    async def asubmit(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle:
        """`submit`, for async code."""
        return await Options(self, self.defaults).asubmit(*args, **kwargs)


class Options(Generic[P, R]):
    """A function with task fields set for its next submits (`AppFunction.options`)."""

    def __init__(self, declared: AppFunction[P, R], fields: dict[str, Any]) -> None:
        self.declared = declared
        self.fields = fields

    def spec(self, *args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
        declared = self.declared
        arguments = bind_arguments(declared.function, declared.name, args, kwargs)
        return {"callable": declared.name, "args": arguments, **self.fields}

    def submit(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle:
        spec = self.spec(*args, **kwargs)
        app = self.declared.app
        return TaskHandle(app, app.sync.submit(**spec))

    async def asubmit(self, *args: P.args, **kwargs: P.kwargs) -> TaskHandle:
        spec = self.spec(*args, **kwargs)
        app = self.declared.app
        return TaskHandle(app, await app.queue.submit(**spec))


class TaskHandle:
    """A submitted task: `task` as it was when submitted or last refreshed (`id`,
    `status` and `position` are also on the handle), and its result once it has ended."""

    def __init__(self, app: App, task: Task) -> None:
        self.app = app
        self.task = task

    def __repr__(self) -> str:
        return f"<TaskHandle {self.task.id[:8]} {self.task.callable} {self.task.status}>"

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def status(self) -> Status:
        """The status when submitted or last refreshed (`refresh`)."""
        return self.task.status

    @property
    def position(self) -> int | None:
        return self.task.position

    def result(self, timeout: float | None = None) -> Any:
        """Wait until the task has ended; what the function returned (as JSON: a tuple
        comes back as a list).

        Raises:
            TaskFailed: it failed (the message has the exception's type and message),
                was cancelled or expired.
            TimeoutError: it did not end within `timeout` seconds.
        """
        return self.app.sync.result(self.task.id, timeout)

    async def aresult(self, timeout: float | None = None) -> Any:
        """`result`, for async code."""
        return await self.app.queue.result(self.task.id, timeout)

    def refresh(self) -> Task:
        """The task as it is now (status, attempts, result); the handle keeps it."""
        self.task = self.app.sync.get(self.task.id)
        return self.task

    async def arefresh(self) -> Task:
        self.task = await self.app.queue.get(self.task.id)
        return self.task


def _fields(given: dict[str, Any]) -> dict[str, Any]:
    """Task fields as a spec names them (`after` is `depends_on`, of tasks or ids)."""
    fields = dict(given)
    if "after" in fields:
        fields["depends_on"] = [*fields.get("depends_on", ()), *_ids(fields.pop("after"))]
    unknown = sorted(set(fields) - TASK_FIELDS)
    if unknown:
        known = ", ".join(sorted({*TASK_FIELDS, "after"}))
        raise InvalidInput(f"unknown task option {unknown[0]!r}; use one of {known}")
    return fields


def _ids(tasks: Iterable[TaskHandle | Task | str] | TaskHandle | Task | str) -> list[str]:
    if isinstance(tasks, TaskHandle):
        return [tasks.id]
    if isinstance(tasks, Task | str):
        return _ids([tasks])
    return [t if isinstance(t, str) else t.id for t in tasks]


def load_app(reference: str) -> App:
    """The App named by `MODULE:ATTRIBUTE` (e.g. `agents:app`), importing the module from
    the current folder or the Python path.

    Raises:
        InvalidInput: the reference is malformed, the module cannot be imported, or the
            attribute is not an App.
    """
    import importlib
    import sys

    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise InvalidInput(f"--app takes MODULE:ATTRIBUTE (e.g. agents:app), not {reference!r}")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise InvalidInput(f"cannot import {module_name}: {type(exc).__name__}: {exc}") from exc
    found: Any = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
    if not isinstance(found, App):
        raise InvalidInput(f"{reference} is not a slotline.App (found {type(found).__name__})")
    return found
