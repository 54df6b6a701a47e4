"""An HTTP client with the store's read and steering verbs, so a CLI or script can work
through a server (`--url`) exactly as with a store (`--store`).

Example:
    with SlotlineClient("http://127.0.0.1:8765", token=os.environ.get("SLOTLINE_TOKEN")) as c:
        task = c.submit({"command": ["pytest", "-x"], "priority": "high"})
        c.bump(task.id)
        print(c.status().to_dict())

Errors come back as the same exceptions the store raises (NotFound, InvalidTransition…);
a server that cannot be reached raises ServerUnavailable, a refused token AccessDenied.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import httpx

from slotline import errors
from slotline.models import Attempt, Event, Kind, Limit, Priority, Status, Task
from slotline.spec import TaskSpec
from slotline.store import QueueStatus
from slotline.store.core import Watcher
from slotline.store.ops import Settings

PAGE = 1000


class AccessDenied(errors.SlotlineError):
    """The server refused the token (401) or its role does not allow the verb (403)."""


class ServerUnavailable(errors.StoreError):
    """The server cannot be reached, or failed to answer."""


_ERRORS: dict[str, type[errors.SlotlineError]] = {
    cls.__name__: cls
    for cls in (
        errors.InvalidInput,
        errors.UnknownDependency,
        errors.DependencyCycle,
        errors.NotFound,
        errors.AmbiguousId,
        errors.InvalidTransition,
        errors.StaleAttempt,
        errors.BoundExceeded,
        errors.StoreError,
        errors.SchemaTooNew,
    )
}


def _epoch(text: str | None) -> float | None:
    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def attempt_from_json(data: dict[str, Any], task_id: str) -> Attempt:
    return Attempt(
        id=data["id"],
        task_id=task_id,
        number=data["number"],
        token="",  # never sent by the server
        node_id=data.get("node_id"),
        pid=data.get("pid"),
        pid_started=None,
        started_at=_epoch(data.get("started_at")) or 0.0,
        finished_at=_epoch(data.get("finished_at")),
        exit_code=data.get("exit_code"),
        outcome=data.get("outcome"),
        reason=data.get("reason"),
        over_limit=bool(data.get("over_limit")),
        lease_expires_at=None,
        log_path=data.get("log_path"),
        cpu_percent=data.get("cpu_percent"),
        rss_bytes=data.get("rss_bytes"),
        peak_cpu_percent=data.get("peak_cpu_percent"),
        peak_rss_bytes=data.get("peak_rss_bytes"),
    )


def task_from_json(data: dict[str, Any]) -> Task:
    """A Task from the API's JSON (env, args and rank are not sent: they stay empty)."""
    attempts = tuple(attempt_from_json(a, data["id"]) for a in data.get("attempts", ()))
    return Task(
        id=data["id"],
        kind=Kind(data["kind"]),
        command=tuple(data.get("command", ())),
        callable=data.get("callable"),
        args={},
        title=data["title"],
        agent=data.get("agent"),
        workspace=data.get("workspace"),
        user=data.get("user"),
        labels=dict(data.get("labels", {})),
        env={},
        priority=Priority.parse(data["priority"]),
        boosted=bool(data.get("boosted")),
        start_now=bool(data.get("start_now")),
        rank="",
        status=Status(data["status"]),
        status_reason=data.get("status_reason"),
        depends_on=tuple(data.get("depends_on", ())),
        parent_id=data.get("parent_id"),
        depth=int(data.get("depth", 0)),
        max_attempts=int(data.get("max_attempts", 1)),
        backoff=float(data.get("backoff", 0.0)),
        timeout=data.get("timeout"),
        queue_ttl=data.get("queue_ttl"),
        not_before=_epoch(data.get("not_before")),
        kill_request=data.get("stop_requested"),
        restart_requested=data.get("stop_requested") == "restart",
        created_at=_epoch(data.get("created_at")) or 0.0,
        queued_at=_epoch(data.get("queued_at")),
        started_at=_epoch(data.get("started_at")),
        finished_at=_epoch(data.get("finished_at")),
        exit_code=data.get("exit_code"),
        failure_reason=data.get("failure_reason"),
        attempt_count=max((a.number for a in attempts), default=0),
        attempt_base=0,
        current_attempt=data.get("current_attempt"),
        memory_mb=data.get("memory_mb"),
        expected_duration=data.get("expected_duration"),
        attempts=attempts,
        position=data.get("position"),
    )


def event_from_json(data: dict[str, Any]) -> Event:
    return Event(
        seq=int(data["seq"]),
        at=_epoch(data.get("at")) or 0.0,
        kind=data["kind"],
        task_id=data.get("task_id"),
        data=dict(data.get("data", {})),
    )


def response_error(response: httpx.Response) -> errors.SlotlineError:
    """The exception a failed response stands for: the store's own (by the body's `type`),
    AccessDenied for 401/403, InvalidInput for other 4xx refusals, else ServerUnavailable."""
    try:
        body = response.json()
        detail, kind = str(body["detail"]), str(body.get("type", ""))
    except (ValueError, KeyError, TypeError):
        detail, kind, body = response.text or response.reason_phrase, "", {}
    if response.status_code in (401, 403):
        return AccessDenied(f"token refused: {detail}", status_code=response.status_code)
    cls = _ERRORS.get(kind)
    if cls is not None:
        extra = {k: v for k, v in body.items() if k in ("status", "limit", "max")}
        return cls(detail, **extra)
    if response.status_code in (400, 413, 422):
        return errors.InvalidInput(detail)
    return ServerUnavailable(f"the server answered {response.status_code}: {detail}")


def settings_from_json(data: dict[str, Any]) -> Settings:
    values = {k: v for k, v in data.items() if k != "limits"}
    per_key = tuple(Limit(x["key"], x.get("value"), int(x["max"])) for x in data["limits"])
    return Settings(values, per_key)


class SlotlineClient:
    """A slotline server, reached over HTTP; one connection pool, closed by `close`."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url, headers=self._headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> SlotlineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # -- plumbing ---------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        if response.is_success:
            return response.json()
        raise response_error(response)

    def async_http(self, timeout: httpx.Timeout) -> httpx.AsyncClient:
        """A new async client on the same server and token, for the live streams."""
        return httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=timeout)

    def _unreachable(self, exc: httpx.HTTPError) -> ServerUnavailable:
        return ServerUnavailable(f"cannot reach the slotline server at {self.url}: {exc}")

    def _task(self, method: str, path: str, body: dict[str, Any] | None = None) -> Task:
        return task_from_json(self._request(method, path, json=body))

    @staticmethod
    def _spec(spec: TaskSpec | dict[str, Any]) -> dict[str, Any]:
        if isinstance(spec, TaskSpec):
            data = spec.model_dump(mode="json", exclude_defaults=True)
            data["priority"] = spec.priority.label
            if spec.kind is not None:
                data["kind"] = spec.resolved_kind.value
            return data
        # Enum values (a Priority) go as their names, which the API takes.
        return {k: v.label if isinstance(v, Priority) else v for k, v in spec.items()}

    # -- reads --------------------------------------------------------------------------

    def get(self, ref: str) -> Task:
        """One task by id or unique prefix, with attempts and position."""
        return self._task("GET", f"/api/tasks/{ref}")

    def list_tasks(
        self, status: Status | str | None = None, limit: int = 10_000, **filters: Any
    ) -> list[Task]:
        """Tasks in submission order; filters: agent, workspace, user, parent, label."""
        params: dict[str, Any] = {k: v for k, v in filters.items() if v is not None}
        if status is not None:
            params["status"] = Status(status).value
        found: list[Task] = []
        while len(found) < limit:
            page = min(PAGE, limit - len(found))
            data = self._request(
                "GET", "/api/tasks", params={**params, "limit": page, "offset": len(found)}
            )
            found.extend(task_from_json(t) for t in data["tasks"])
            if len(data["tasks"]) < page:
                break
        return found

    def status(self) -> QueueStatus:
        data = self._request("GET", "/api/status")
        return QueueStatus(
            active=data["active"],
            max_concurrent=data["max_concurrent"],
            paused=data["paused"],
            over_limit=data["over_limit"],
            queued=[task_from_json(t) for t in data["queued"]],
            running=[task_from_json(t) for t in data["running"]],
            admission=data.get("admission_hold"),
        )

    def events(self, since: int = 0, limit: int = 1000) -> list[Event]:
        data = self._request("GET", "/api/events", params={"since": since, "limit": limit})
        return [event_from_json(e) for e in data["events"]]

    def last_seq(self) -> int:
        return int(self._request("GET", "/api/events", params={"limit": 0})["last_seq"])

    def follow(self, since: int | None = None) -> Iterator[Event]:
        """Events after `since` (None: only new ones), then live, from the SSE stream.
        Ends when the server drops the stream; resume with the last seq seen."""
        params = {} if since is None else {"since": since}
        try:
            with self._http.stream(
                "GET", "/api/events/stream", params=params, timeout=None
            ) as response:
                if not response.is_success:
                    response.read()
                    raise response_error(response)
                for line in response.iter_lines():
                    if line.startswith("data: ") and '"seq"' in line:
                        yield event_from_json(json.loads(line[len("data: ") :]))
        except httpx.HTTPError as exc:
            raise ServerUnavailable(f"the event stream from {self.url} broke: {exc}") from exc

    def watcher(self) -> Watcher:
        """A handle whose `wait` returns True once the server has published an event
        after the last one at the time of this call, as a store's watcher does."""
        from slotline.remote import EventWatcher

        return EventWatcher(self, self.last_seq())

    def settings(self) -> Settings:
        return settings_from_json(self._request("GET", "/api/limits"))

    def counts(self) -> dict[str, int]:
        return dict(self._request("GET", "/api/stats")["counts"])

    def stats(self) -> dict[str, Any]:
        return dict(self._request("GET", "/api/stats"))

    def export(self) -> dict[str, Any]:
        return dict(self._request("GET", "/api/export"))

    def config(self) -> dict[str, Any]:
        return dict(self._request("GET", "/api/config"))

    def log(self, ref: str, attempt: int | None = None) -> bytes:
        """The whole output of an attempt (the last one by default)."""
        params = {} if attempt is None else {"attempt": attempt}
        try:
            response = self._http.get(f"/api/tasks/{ref}/log", params=params)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from exc
        if not response.is_success:
            raise response_error(response)
        return response.content

    def follow_log(self, ref: str, attempt: int | None = None) -> Iterator[bytes]:
        """An attempt's output as it is written, until it ends."""
        params: dict[str, Any] = {"follow": "true"}
        if attempt is not None:
            params["attempt"] = attempt
        with self._http.stream("GET", f"/api/tasks/{ref}/log", params=params, timeout=None) as r:
            if not r.is_success:
                r.read()
                raise response_error(r)
            yield from r.iter_bytes()

    # -- submit and steer ---------------------------------------------------------------

    def submit(self, spec: TaskSpec | dict[str, Any]) -> Task:
        return self._task("POST", "/api/tasks", self._spec(spec))

    def submit_many(self, specs: Iterable[TaskSpec | dict[str, Any]]) -> list[Task]:
        body = {"tasks": [self._spec(s) for s in specs]}
        return [task_from_json(t) for t in self._request("POST", "/api/tasks/batch", json=body)]

    def cancel(self, ref: str, cascade: bool = False) -> Task:
        return self._task("POST", f"/api/tasks/{ref}/cancel", {"cascade": cascade})

    def terminate(self, ref: str, reason: str = "by request") -> Task:
        return self._task("POST", f"/api/tasks/{ref}/terminate", {"reason": reason})

    def boost(self, ref: str) -> Task:
        return self._task("POST", f"/api/tasks/{ref}/boost")

    def bump(self, ref: str) -> Task:
        return self._task("POST", f"/api/tasks/{ref}/bump")

    def move(
        self,
        ref: str,
        *,
        to: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> Task:
        pairs = (("to", to), ("before", before), ("after", after))
        body = {k: v for k, v in pairs if v is not None}
        return self._task("POST", f"/api/tasks/{ref}/move", body)

    def set_priority(self, ref: str, level: str | int | Priority) -> Task:
        return self._task(
            "POST", f"/api/tasks/{ref}/priority", {"priority": Priority.parse(level).label}
        )

    def restart(self, ref: str, force: bool = False) -> Task:
        return self._task("POST", f"/api/tasks/{ref}/restart", {"force": force})

    def hold(self, ref: str) -> Task:
        return self._task("POST", f"/api/tasks/{ref}/hold")

    def release(self, ref: str) -> Task:
        return self._task("POST", f"/api/tasks/{ref}/release")

    def pause(self) -> None:
        self._request("POST", "/api/pause")

    def resume(self) -> None:
        self._request("POST", "/api/resume")

    def clear(self) -> int:
        return int(self._request("POST", "/api/clear")["cancelled"])

    def set_setting(self, name: str, value: Any) -> None:
        self._request("POST", "/api/limits", json={"settings": {name: value}})

    def set_limit(self, key: str, value: str | None, max_running: int | None) -> None:
        limit = {"key": key, "value": value, "max": max_running}
        self._request("POST", "/api/limits", json={"limits": [limit]})

    def set_exempt_agents(self, agents: list[str]) -> None:
        self._request("POST", "/api/limits", json={"exempt_agents": agents})
