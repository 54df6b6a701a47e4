"""A committed write is answered, never turned into an error by what is read after it:
a global budget or rate does not break the estimate, and an estimate (or a read back)
that fails leaves the task's answer without an ETA, saying why, on every surface."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, NoReturn

import httpx
import pytest

import slotline
from slotline.cli import main as cli_main
from slotline.config.file import Config
from slotline.mcp.calls import BackendCalls
from slotline.scheduler import eta
from slotline.store import open_store
from slotline.store.readback import read_back

from .conftest import Running


def _no_simulation(*_args: Any) -> NoReturn:
    raise RuntimeError("injected simulation failure")


@pytest.fixture
def failing_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every simulation of the line fails (a rule it cannot play)."""
    monkeypatch.setattr(eta, "simulate", _no_simulation)


@pytest.mark.parametrize(
    "limits",
    [
        {"budgets": [{"key": "global", "amount": 100, "period": "1d"}]},
        {"rates": [{"key": "global", "max": 1000, "period": "1d"}]},
    ],
)
def test_a_global_budget_or_rate_lets_submit_and_reads_answer(
    http: httpx.Client, server: Running, limits: dict[str, Any]
) -> None:
    assert (
        http.post("/api/limits", json={**limits, "settings": {"max_concurrent": 1}}).status_code
        == 200
    )
    took = {"expected_duration": 60}  # (a known run time: an estimate is made)
    first = http.post("/api/tasks", json={"command": ["true"], **took})
    assert first.status_code == 201, first.text
    server.store.claim("elsewhere")

    second = http.post("/api/tasks", json={"command": ["true"], **took})

    assert second.status_code == 201, second.text
    body = second.json()
    assert (body["position"], body["eta_unavailable"]) == (1, None)
    assert body["eta_start"] is not None
    assert len(server.store.list_tasks()) == 2
    for path in ("/api/status", "/api/tasks", f"/api/tasks/{body['id']}", "/api/queue_status"):
        assert http.get(path).status_code == 200, path


@pytest.mark.usefixtures("failing_estimates")
def test_a_failed_estimate_answers_the_submit_once_without_an_eta(
    http: httpx.Client, server: Running
) -> None:
    answer = http.post("/api/tasks", json={"command": ["true"]})

    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["status"], body["position"], body["eta_start"]) == ("queued", 1, None)
    assert body["eta_unavailable"] == "simulating the line failed: injected simulation failure"
    assert [t.id for t in server.store.list_tasks()] == [body["id"]]
    # The reads degrade alike, and so does the answer to a steering write.
    (queued,) = http.get("/api/status").json()["queued"]
    assert queued["eta_unavailable"] == body["eta_unavailable"]
    held = http.post(f"/api/tasks/{body['id']}/hold")
    assert (held.status_code, held.json()["status"]) == (200, "held")


def test_a_failed_read_back_answers_the_submit_with_the_task_as_written(
    http: httpx.Client, server: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: Any, **_kwargs: Any) -> NoReturn:
        raise RuntimeError("injected read failure")

    monkeypatch.setattr(type(server.store), "get", broken)

    answer = http.post("/api/tasks", json={"command": ["true"], "title": "once"})

    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["title"], body["status"], body["eta_start"]) == ("once", "queued", None)
    # the reason is short: the driver's error is for the log, not for every reader.
    assert body["eta_unavailable"] == "reading the task back failed"
    assert "injected read failure" not in answer.text
    assert [t.title for t in server.store.list_tasks()] == ["once"]


def test_a_failed_read_back_of_a_task_out_of_line_adds_no_missing_estimate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(_task_id: str) -> NoReturn:
        raise RuntimeError("injected read failure")

    with open_store(tmp_path / "s.db") as store:
        cancelled = store.cancel(store.submit({"command": ["true"]}).id)
        with caplog.at_level(logging.WARNING):
            answer = read_back(broken, cancelled)

    assert (answer.status.value, answer.eta_unavailable) == ("cancelled", None)
    assert "injected read failure" in caplog.text


def _reads_fail_after(monkeypatch: pytest.MonkeyPatch, server: Running, verb: str) -> None:
    """Every read of a task fails once the store's `verb` has been written."""
    kind = type(server.store)
    write, read, written = getattr(kind, verb), kind.get, []

    def writing(self: Any, *args: Any, **kwargs: Any) -> Any:
        done = write(self, *args, **kwargs)
        written.append(verb)
        return done

    def get(self: Any, *args: Any, **kwargs: Any) -> Any:
        if written:
            raise RuntimeError("injected read failure")
        return read(self, *args, **kwargs)

    monkeypatch.setattr(kind, verb, writing)
    monkeypatch.setattr(kind, "get", get)


def test_an_external_claim_answers_with_its_tokens_when_the_read_back_fails(
    http: httpx.Client, server: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    submitted = http.post("/api/tasks", json={"kind": "external", "title": "review"}).json()
    _reads_fail_after(monkeypatch, server, "claim")

    answer = http.post("/api/external/claim", json={})

    assert answer.status_code == 200, answer.text
    (claimed,) = answer.json()["claims"]
    assert claimed["task"]["id"] == submitted["id"]
    assert claimed["task"]["status"] == "running"
    assert claimed["token"] == server.store.attempt(claimed["attempt_id"]).token


@pytest.mark.parametrize(
    ("report", "body", "status"),
    [("succeeded", {}, "succeeded"), ("failed", {"reason": "no luck"}, "failed")],
)
def test_an_external_report_answers_when_the_read_back_fails(
    http: httpx.Client,
    server: Running,
    monkeypatch: pytest.MonkeyPatch,
    report: str,
    body: dict[str, Any],
    status: str,
) -> None:
    http.post("/api/tasks", json={"kind": "external", "title": "review"})
    (claimed,) = http.post("/api/external/claim", json={}).json()["claims"]
    _reads_fail_after(monkeypatch, server, "finish")

    path = f"/api/external/attempts/{claimed['attempt_id']}/{report}"
    answer = http.post(path, json={"token": claimed["token"], **body})

    assert answer.status_code == 200, answer.text
    assert (answer.json()["status"], answer.json()["eta_unavailable"]) == (status, None)
    monkeypatch.undo()
    assert server.store.get(claimed["task"]["id"]).status.value == status


@pytest.mark.usefixtures("failing_estimates")
def test_the_cli_submit_says_no_estimate_and_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no slotline.yaml
    store_path = tmp_path / "cli.db"
    with pytest.raises(SystemExit) as done:
        cli_main(["--store", str(store_path), "submit", "--", "true"])

    assert done.value.code == 0
    said = capsys.readouterr().out
    assert said.endswith(
        ": queued, position 1 (NEXT UP); no estimate: simulating the line failed: "
        "injected simulation failure\n"
    ), said
    with open_store(store_path) as store:
        assert len(store.list_tasks()) == 1


@pytest.mark.usefixtures("failing_estimates")
def test_the_python_api_and_mcp_submit_answer_without_an_eta(tmp_path: Path) -> None:
    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:
            task = await queue.submit(["true"], title="api")
            assert (await queue.get(task.id)).eta_unavailable == (
                "simulating the line failed: injected simulation failure"
            )
            calls = BackendCalls(queue.store, Config(), None)
            answer = await calls.submit({"command": ["true"], "title": "mcp"})
            assert (answer["position"], answer["eta_start"]) == (2, None)
            assert answer["eta_unavailable"].startswith("simulating the line failed")
            assert [t.title for t in await queue.list()] == ["api", "mcp"]

    asyncio.run(main())


def test_a_line_that_cannot_be_simulated_is_tried_once_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tried = []

    def failing(*_args: Any) -> NoReturn:
        tried.append(1)
        _no_simulation()

    with open_store(tmp_path / "s.db") as store:
        task = store.submit({"command": ["true"]})
        with monkeypatch.context() as patched, caplog.at_level(logging.WARNING):
            patched.setattr(eta, "simulate", failing)

            # When an unchanged line is read twice,
            first, second = store.get(task.id), store.get(task.id)

        # Then it was simulated (and the failure logged) once, both reads saying why,
        assert (
            first.eta_unavailable
            == second.eta_unavailable
            == ("simulating the line failed: injected simulation failure")
        )
        assert len(tried) == 1
        failures = [r for r in caplog.records if "simulating the line failed" in r.getMessage()]
        assert len(failures) == 1
        # and once the line has changed, the estimate is made again.
        store.submit({"command": ["true"]})
        again = store.get(task.id)
        assert again.eta_unavailable == "no run has finished yet"  # (not a failure)
        assert again.eta_start is not None


def test_the_python_api_submit_of_a_function_answers_when_the_serving_read_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        async with slotline.open_queue(tmp_path / "q.db") as queue:

            def broken() -> NoReturn:
                raise RuntimeError("injected read failure")

            monkeypatch.setattr(queue.store, "served_functions", broken)
            task = await queue.submit(callable="reports.build", title="fn")
            assert [t.id for t in await queue.list()] == [task.id]

    asyncio.run(main())
