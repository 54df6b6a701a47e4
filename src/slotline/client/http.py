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
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import httpx

from slotline.client.refusals import response_error
from slotline.client.wire import (
    delivery_from_json,
    event_from_json,
    schedule_path,
    settings_from_json,
    spec_to_json,
    status_from_json,
    task_from_json,
    task_path,
)
from slotline.errors import ServerUnavailable
from slotline.line import STATUS_HEAD
from slotline.models import Event, Priority, Status, Task, TaskPage
from slotline.scheduler.cron import Schedule
from slotline.spec import TaskSpec
from slotline.store import BULK_CHUNK, BulkResult, Delivery, QueueStatus, Settings, Watcher
from slotline.store.bulk import Progress
from slotline.taskfilter import ListQuery, TaskFilter

PAGE = 1000


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

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request to the API (`path` under the server), its JSON answer.

        Raises:
            SlotlineError: the store's own error the server answered with.
        """
        return self._request(method, path, **kwargs)

    def async_http(self, timeout: httpx.Timeout) -> httpx.AsyncClient:
        """A new async client on the same server and token, for the live streams."""
        return httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=timeout)

    def _unreachable(self, exc: httpx.HTTPError) -> ServerUnavailable:
        return ServerUnavailable(f"cannot reach the slotline server at {self.url}: {exc}")

    def _task(self, method: str, path: str, body: dict[str, Any] | None = None) -> Task:
        return task_from_json(self._request(method, path, json=body))

    # -- reads --------------------------------------------------------------------------

    def get(self, ref: str) -> Task:
        """One task by id or unique prefix, with attempts and position."""
        return self._task("GET", task_path(ref))

    def list_tasks(
        self, status: Status | str | None = None, limit: int = 10_000, **filters: Any
    ) -> list[Task]:
        """Tasks in submission order; filters: agent, workspace, user, label (a str or a
        list of them), q, parent (a full id)."""
        parent = filters.pop("parent", None)
        if isinstance(filters.get("label"), str):
            filters["label"] = [filters["label"]]
        wanted = TaskFilter(status=[Status(status)] if status is not None else [], **filters)
        return self.list_page(ListQuery(wanted, parent_id=parent, limit=limit)).tasks

    def list_page(self, query: ListQuery | None = None) -> TaskPage:
        """One page of the tasks the token may see that `query` asks for (as
        `Store.list_page`; the token, not `owner` or `root`, scopes it), read in requests
        of at most 1,000 tasks."""
        query = query or ListQuery()
        wanted, limit, after = query.wanted, query.limit, query.after
        params: dict[str, Any] = {
            "newest": query.newest, "count": query.count, "offset": query.offset
        }  # fmt: skip
        if query.ended:
            params["ended"] = True
        parent_id = query.parent_id
        if wanted is not None:
            params.update(wanted.model_dump(mode="json", exclude_defaults=True))
        if parent_id is not None:
            params["parent"] = parent_id
        found: list[Task] = []
        total = None
        while True:
            size = min(PAGE, limit - len(found))
            data = self._request(
                "GET",
                "/api/tasks",
                params={**params, "limit": size, **({"after": after} if after else {})},
            )
            found.extend(task_from_json(t) for t in data["tasks"])
            total = data.get("total") if total is None else total
            after = data.get("next_after")
            params.update(offset=0, count=False)
            if after is None or len(found) >= limit:
                return TaskPage(found, after, total)

    def status(
        self,
        mine: bool = False,
        root: str | None = None,
        limit: int = STATUS_HEAD,
        *,
        all: bool = False,
    ) -> QueueStatus:
        """Capacity and the head of the line (its first `limit` tasks; with `all`, every
        one: `queued_total` counts them); with `mine`, also the caller's own live tasks (a
        task token's subtree, a user's tasks, or the subtree of `root`)."""
        params: dict[str, Any] = {"mine": "true"} if mine else {}
        if mine and root:
            params["root"] = root
        if all:
            params["all"] = "true"
        else:
            params["limit"] = limit
        return status_from_json(self._request("GET", "/api/status", params=params))

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
        from slotline.client.remote import EventWatcher

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

    def notify_log(self, limit: int = 100) -> list[Delivery]:
        answer = self._request("GET", "/api/notify/log", params={"limit": limit})
        return [delivery_from_json(d) for d in answer["deliveries"]]

    def log(self, ref: str, attempt: int | None = None) -> bytes:
        """The whole output of an attempt (the last one by default)."""
        params = {} if attempt is None else {"attempt": attempt}
        try:
            response = self._http.get(task_path(ref, "log"), params=params)
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
        with self._http.stream("GET", task_path(ref, "log"), params=params, timeout=None) as r:
            if not r.is_success:
                r.read()
                raise response_error(r)
            yield from r.iter_bytes()

    # -- submit and steer ---------------------------------------------------------------

    def submit(self, spec: TaskSpec | dict[str, Any]) -> Task:
        return self._task("POST", "/api/tasks", spec_to_json(spec))

    def submit_many(self, specs: Iterable[TaskSpec | dict[str, Any]]) -> list[Task]:
        body = {"tasks": [spec_to_json(s) for s in specs]}
        return [task_from_json(t) for t in self._request("POST", "/api/tasks/batch", json=body)]

    # -- recurring schedules (the store's verbs of the same names) ---------------------

    def schedules(self) -> list[Schedule]:
        data = self._request("GET", "/api/schedules")
        return [Schedule.from_dict(s) for s in data["schedules"]]

    def schedule(self, name: str) -> Schedule:
        return Schedule.from_dict(self._request("GET", schedule_path(name)))

    def add_schedule(
        self,
        name: str,
        cron_expr: str,
        spec: TaskSpec | dict[str, Any],
        *,
        tz: str = "UTC",
        overlap: str = "skip",
        paused: bool = False,
        replace_existing: bool = False,
    ) -> Schedule:
        body = {
            "name": name,
            "cron": cron_expr,
            "tz": tz,
            "overlap": overlap,
            "paused": paused,
            "replace": replace_existing,
            "task": spec_to_json(spec),
        }
        return Schedule.from_dict(self._request("POST", "/api/schedules", json=body))

    def pause_schedule(self, name: str) -> Schedule:
        return Schedule.from_dict(self._request("POST", schedule_path(name, "pause")))

    def resume_schedule(self, name: str) -> Schedule:
        return Schedule.from_dict(self._request("POST", schedule_path(name, "resume")))

    def remove_schedule(self, name: str) -> Schedule:
        return Schedule.from_dict(self._request("DELETE", schedule_path(name)))

    def cancel(self, ref: str, cascade: bool = False) -> Task:
        return self._task("POST", task_path(ref, "cancel"), {"cascade": cascade})

    def terminate(self, ref: str, reason: str = "by request", resumable: bool = False) -> Task:
        body = {"reason": reason, "resumable": resumable}
        return self._task("POST", task_path(ref, "terminate"), body)

    def send_input(self, ref: str, text: str, enter: bool = True) -> Task:
        """Type `text` into an interactive task's run (then Enter): the server's machine
        must be the run's."""
        return self._task("POST", task_path(ref, "input"), {"text": text, "enter": enter})

    def followup(self, ref: str, prompt: str) -> Task:
        """A follow-up of task `ref` (`slotline followup`), created by the server from
        its own agent types."""
        return self._task("POST", task_path(ref, "followup"), {"prompt": prompt})

    def boost(self, ref: str) -> Task:
        return self._task("POST", task_path(ref, "boost"))

    def bump(self, ref: str) -> Task:
        return self._task("POST", task_path(ref, "bump"))

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
        return self._task("POST", task_path(ref, "move"), body)

    def set_priority(
        self, ref: str, level: str | int | Priority, reason: str | None = None
    ) -> Task:
        body = {"priority": Priority.parse(level).label, "reason": reason}
        return self._task("POST", task_path(ref, "priority"), body)

    def bulk(
        self,
        verb: str,
        refs: list[str],
        *,
        priority: str | int | Priority | None = None,
        reason: str | None = None,
        force: bool = False,
        progress: Progress | None = None,
    ) -> BulkResult:
        """As `Store.bulk`, one request per BULK_CHUNK ids: each answers within seconds
        whatever the count, and `progress` is called after each. A ref that names no
        task stops the call at its chunk; the chunks before it stay done."""
        level = None if priority is None else Priority.parse(priority).label
        result = BulkResult(verb)
        for start in range(0, len(refs), BULK_CHUNK):
            chunk = refs[start : start + BULK_CHUNK]
            body = {"verb": verb, "ids": chunk, "priority": level, "reason": reason}
            data = self._request("POST", "/api/tasks/bulk", json={**body, "force": force})
            result.done.extend(data["done"])
            result.skipped.extend(data["skipped"])
            if progress is not None:
                progress(start + len(chunk), len(refs))
        return result

    def emergency_stop(self, reason: str = "emergency stop") -> list[str]:
        data = self._request("POST", "/api/emergency-stop", json={"reason": reason})
        return list(data["stopped"])

    def restart(self, ref: str, force: bool = False) -> Task:
        return self._task("POST", task_path(ref, "restart"), {"force": force})

    def hold(self, ref: str) -> Task:
        return self._task("POST", task_path(ref, "hold"))

    def release(self, ref: str) -> Task:
        return self._task("POST", task_path(ref, "release"))

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

    def set_rate(
        self, key: str, value: str | None, max_starts: int | None, period: float | str | None = None
    ) -> None:
        rate = {"key": key, "value": value, "max": max_starts, "period": period}
        self._request("POST", "/api/limits", json={"rates": [rate]})

    def set_budget(
        self,
        key: str,
        value: str | None,
        amount: float | None,
        period: float | str | None = None,
        unit: str | None = "usd",
    ) -> None:
        budget = {"key": key, "value": value, "amount": amount, "period": period, "unit": unit}
        self._request("POST", "/api/limits", json={"budgets": [budget]})

    def set_fairness(self, key: str | None, weights: Mapping[str, float] | None = None) -> None:
        fairness = None if key is None else {"key": key, "weights": dict(weights or {})}
        self._request("POST", "/api/limits", json={"fairness": fairness})

    def set_backoff(self, agent: str, rule: Mapping[str, Any] | None) -> None:
        body = {"backoff": [{"agent": agent, "rule": None if rule is None else dict(rule)}]}
        self._request("POST", "/api/limits", json=body)
