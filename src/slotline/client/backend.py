"""What the commands need of the queue: a Store (`--store`) or a SlotlineClient (`--url`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from slotline.line import STATUS_HEAD
from slotline.models import Event, Priority, Status, Task, TaskPage

if TYPE_CHECKING:  # a command imports what it uses (`slotline status` needs no pydantic)
    from slotline.config.file import Config
    from slotline.spec import TaskSpec
    from slotline.store import BulkResult, QueueStatus, Settings, Watcher
    from slotline.store.bulk import Progress
    from slotline.taskfilter import ListQuery


class Backend(Protocol):
    """The read and steering verbs, with the same signatures and errors on both sides, and
    `watcher()` to wake followers (`events -f`, `logs -f`, `submit --wait`, `top`)."""

    @property
    def url(self) -> str: ...

    def get(self, ref: str) -> Task: ...

    def list_tasks(self, status: Status | None = None, limit: int = 10_000) -> list[Task]: ...

    def list_page(self, query: ListQuery | None = None) -> TaskPage: ...

    def status(self, *, limit: int = STATUS_HEAD, all: bool = False) -> QueueStatus: ...

    def events(self, since: int = 0, limit: int = 1000) -> list[Event]: ...

    def last_seq(self) -> int: ...

    def settings(self) -> Settings: ...

    def counts(self) -> dict[str, int]: ...

    def watcher(self) -> Watcher: ...

    def submit(self, spec: TaskSpec | dict[str, Any]) -> Task: ...

    def cancel(self, ref: str, cascade: bool = False) -> Task: ...

    def terminate(self, ref: str, reason: str = "by request", resumable: bool = False) -> Task: ...

    def boost(self, ref: str) -> Task: ...

    def bump(self, ref: str) -> Task: ...

    def move(
        self,
        ref: str,
        *,
        to: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> Task: ...

    def set_priority(
        self, ref: str, level: str | int | Priority, reason: str | None = None
    ) -> Task: ...

    def bulk(
        self,
        verb: str,
        refs: list[str],
        *,
        priority: str | int | Priority | None = None,
        reason: str | None = None,
        force: bool = False,
        progress: Progress | None = None,
    ) -> BulkResult: ...

    def emergency_stop(self, reason: str = "emergency stop") -> list[str]: ...

    def restart(self, ref: str, force: bool = False) -> Task: ...

    def hold(self, ref: str) -> Task: ...

    def release(self, ref: str) -> Task: ...

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def clear(self) -> int: ...

    def set_setting(self, name: str, value: Any) -> None: ...

    def set_limit(self, key: str, value: str | None, max_running: int | None) -> None: ...

    def set_rate(
        self, key: str, value: str | None, max_starts: int | None, period: float | str | None = None
    ) -> None: ...

    def set_budget(
        self,
        key: str,
        value: str | None,
        amount: float | None,
        period: float | str | None = None,
        unit: str | None = "usd",
    ) -> None: ...

    def set_fairness(self, key: str | None, weights: Mapping[str, float] | None = None) -> None: ...

    def set_backoff(self, agent: str, rule: Mapping[str, Any] | None) -> None: ...

    def close(self) -> None: ...


def agent_type_fields(
    backend: Backend,
    config: Config,
    fields: dict[str, Any],
    prompt: str | None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Submit fields for an agent type, filled where the type is defined. A server fills
    its own types: the caller's slotline.yaml may lack them (a run's working directory is
    its workspace) and a user or task token may not send the raw command they expand to.
    On a store, the local configuration fills them when it declares the type, else what
    a live node published of it (`published.agent_config`; `warn` hears when the two
    differ), so that a client run from any folder builds the task the node would.

    Raises:
        InvalidInput: on a store, as `expand_agent_type` does; an unknown type's message
            names the types of the local configuration and of the running nodes.
    """
    from slotline.config.templates import builds_command, expand_agent_type
    from slotline.store import Store

    if isinstance(backend, Store):
        agent = fields.get("agent")
        if isinstance(agent, str) and builds_command(fields):
            from slotline.config.published import store_agent_config

            config = store_agent_config(backend, config, agent, warn)
        return expand_agent_type(config, fields, prompt)
    data = {key: value for key, value in fields.items() if value is not None}
    if not data.get("command"):
        data.pop("command", None)
    if prompt is not None:
        data["prompt"] = prompt
    return data
