"""schemathesis with every check, as `st run --checks all` (stateful phase included; see
schemathesis.toml),
against a served app with an admin token: what the OpenAPI document allows, the server
accepts; what it forbids, the server refuses; a 405 lists the path's methods."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slotline.server import ServerOptions

from .conftest import ServerFactory

CONFIG = Path(__file__).with_name("schemathesis.toml")
ST = Path(sys.executable).with_name("st")


@pytest.mark.timeout(300)
def test_the_openapi_document_states_what_the_server_enforces(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # No node runs: the tasks the cases submit stay queued, nothing is executed.
    server = make_server(options=ServerOptions(heartbeat=0.5, compat_start_wait=1.0))
    token = server.token("fuzzer", "admin")
    argv = [
        str(ST), "--config-file", str(CONFIG), "run", f"{server.url}/openapi.json",
        "--header", f"Authorization: Bearer {token}",
        "--no-color", "--report-dir", str(tmp_path),
    ]  # fmt: skip
    # Run in tmp_path: st keeps its cache (.schemathesis/) in the working directory.
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=280, check=False, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout[-20_000:] + done.stderr[-2_000:]


def test_a_405_lists_every_method_of_its_path(make_server: ServerFactory) -> None:
    server = make_server()
    with server.client() as http:
        limits = http.request("OPTIONS", "/api/limits")
        schedule = http.put("/api/schedules/nightly")
        batch = http.get("/api/tasks/batch")  # not a task id: POST's path

    assert (limits.status_code, limits.headers["allow"]) == (405, "GET, POST")
    assert (schedule.status_code, schedule.headers["allow"]) == (405, "DELETE, GET")
    assert (batch.status_code, batch.headers["allow"]) == (405, "POST")


def test_a_task_id_that_is_not_one_is_refused_by_the_schema(make_server: ServerFactory) -> None:
    server = make_server()
    with server.client() as http:
        document = http.get("/openapi.json").json()
        answer = http.get("/api/tasks/not-an-id")

    ref = document["paths"]["/api/tasks/{ref}"]["get"]["parameters"][0]
    assert ref["schema"]["pattern"].startswith("^([0-9a-fA-F]{1,32}|")
    assert answer.status_code == 422
    assert "ref" in answer.json()["detail"]
