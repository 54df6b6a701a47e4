"""Tokens and streams: revocation ends open streams, tokens stay out of logs, a server
whose last token was revoked stays closed, and runs get a task-scoped token."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from slotline.config.file import Config
from slotline.errors import InvalidInput
from slotline.models import Status
from slotline.runner.env import build_env
from slotline.server import ServerOptions
from slotline.server.auth import TokenBook
from slotline.server.listen import check_bind
from slotline.store import open_store

from .conftest import Running, ServerFactory, command, until


def revoke(server: Running, name: str) -> None:
    """`slotline token revoke NAME`, for real, on the server's token file."""
    env = {**os.environ, "SLOTLINE_TOKENS": str(server.tokens_path)}
    done = subprocess.run(
        [sys.executable, "-m", "slotline", "token", "revoke", name],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_revoking_a_token_ends_its_websocket_sse_and_log_streams(
    make_server: ServerFactory,
) -> None:
    server = make_server(node=True)
    admin = server.token("root", "admin")
    watcher = server.token("watcher", "viewer")
    with server.client(admin) as http:
        task = http.post(
            "/api/tasks",
            json={"command": command("import time", "print('hi', flush=True)", "time.sleep(600)")},
        ).json()
        until(
            lambda: (
                http.get(f"/api/tasks/{task['id']}").json()["attempts"]
                and http.get(f"/api/tasks/{task['id']}").json()["attempts"][-1]["pid"]
            ),
            what="the task running",
        )
    headers = {"Authorization": f"Bearer {watcher}"}
    ws_url = server.url.replace("http://", "ws://") + "/api/events/ws?since=0"
    timeout = httpx.Timeout(10.0, read=30.0)
    with (
        connect(ws_url, additional_headers=headers, open_timeout=10) as ws,
        httpx.Client(base_url=server.url, headers=headers, timeout=timeout) as http,
        http.stream("GET", "/api/events/stream", params={"since": 0}) as sse,
        http.stream("GET", f"/api/tasks/{task['id']}/log", params={"follow": "true"}) as log,
    ):
        assert sse.status_code == 200
        assert log.status_code == 200
        ws.recv(timeout=10)  # delivering before the revoke
        revoke(server, "watcher")
        # The WebSocket closes with 1008 and a reason.
        closed = None
        deadline = time.monotonic() + 30
        while closed is None and time.monotonic() < deadline:
            try:
                ws.recv(timeout=5)
            except ConnectionClosed as exc:
                closed = exc.rcvd
        assert closed is not None
        assert closed.code == 1008
        assert "token is not valid" in closed.reason
        # The SSE stream says why, then ends.
        lines = list(sse.iter_lines())
        assert "event: refused" in lines
        # The log follow ends although the task still runs.
        assert b"hi" in b"".join(log.iter_bytes())
        assert http.get(f"/api/tasks/{task['id']}").status_code == 401
    with server.client(admin) as http:  # the other token still works
        assert http.get(f"/api/tasks/{task['id']}").json()["status"] == "running"


def test_tokens_never_reach_the_log(
    make_server: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    server = make_server(options=ServerOptions(heartbeat=0.5, access_log=True))
    token = server.token("root", "admin")
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/api/tasks", params={"token": token}).status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        assert http.get("/api/tasks", headers=headers).status_code == 200
    ws_url = server.url.replace("http://", "ws://") + f"/api/events/ws?token={token}"
    with pytest.raises(InvalidStatus):
        connect(ws_url, open_timeout=10).close()

    def server_log() -> str:  # the test's own client (httpx) logs its URLs too
        return "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("httpx"))

    until(lambda: "WebSocket" in server_log(), what="the WebSocket line logged")
    text = server_log()
    assert "GET /api/tasks?token=*** " in text  # the access log was on
    assert token not in text
    assert token.removeprefix("slt_") not in text


def test_revoking_the_last_token_closes_the_server_until_open_mode_is_asked(
    make_server: ServerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    server = make_server()
    admin = server.token("root", "admin")
    with server.client(admin) as http:
        assert http.get("/api/status").status_code == 200
    revoke(server, "root")
    with server.client() as http:
        refused = http.get("/api/status")
        assert refused.status_code == 401
        assert "auth: none" in refused.json()["detail"]
    assert "refusing every request" in caplog.text
    # A new server on that token file starts closed too.
    again = make_server(tokens_path=server.tokens_path)
    with again.client() as http:
        assert http.get("/api/status").status_code == 401
    # Open mode asked for explicitly opens it.
    opened = make_server(tokens_path=server.tokens_path, config=Config(auth="none"))
    with opened.client() as http:
        assert http.get("/api/status").status_code == 200


def test_open_mode_is_for_loopback_only(tmp_path: Path) -> None:
    book = TokenBook(tmp_path / "tokens.json")
    check_bind("127.0.0.1", book, open_mode=True)
    with pytest.raises(InvalidInput, match="open mode"):
        check_bind("0.0.0.0", book, open_mode=True)
    with pytest.raises(InvalidInput, match="slotline token create"):
        check_bind("0.0.0.0", book)


SCRIPT = """
import json, os, subprocess, sys
out = sys.argv[1]
def slotline(*args):
    done = subprocess.run([sys.executable, "-m", "slotline", "--json", *args],
                          capture_output=True, text=True, timeout=60)
    return {"code": done.returncode, "out": done.stdout, "err": done.stderr}
report = {"env": {k: v for k, v in os.environ.items() if k.startswith("SLOTLINE_")}}
report["submit"] = slotline("submit", "--", sys.executable, "-c", "pass")
report["cancel_other"] = slotline("cancel", sys.argv[2])
report["status"] = slotline("status")
with open(out + ".tmp", "w") as f:
    json.dump(report, f)
os.replace(out + ".tmp", out)
"""


def test_a_run_reaches_the_api_with_a_token_scoped_to_its_subtree(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    check_run_with_task_token(make_server(node=True), tmp_path)


@pytest.mark.postgres
def test_a_run_on_postgres_gets_no_store_password(
    pg_url: str, make_server: ServerFactory, tmp_path: Path
) -> None:
    store_url = pg_url.replace("postgres@", "postgres:s3cret-pw@", 1)  # trust auth ignores it
    assert "s3cret-pw" in store_url
    check_run_with_task_token(make_server(node=True, store_url=store_url), tmp_path)


def check_run_with_task_token(server: Running, tmp_path: Path) -> None:
    """A real command run by the node submits a subtask with `slotline submit` and its
    environment, cannot steer outside its subtree, and its token dies with its attempt."""
    admin = server.token("root", "admin")
    report = tmp_path / "report.json"
    with server.client(admin) as http:
        other = http.post("/api/tasks", json={"command": ["true"], "hold": True}).json()
        parent = http.post(
            "/api/tasks",
            json={"command": [sys.executable, "-c", SCRIPT, str(report), other["id"]]},
        ).json()
        until(report.exists, timeout=60, what="the run's report")
        seen = json.loads(report.read_text())
        env = seen["env"]
        # The run reaches slotline through the API, with a task token, and no store URL.
        assert env["SLOTLINE_URL"] == server.url
        assert env["SLOTLINE_TOKEN"].startswith("slt_task.")
        assert "SLOTLINE_STORE" not in env
        assert not any("s3cret" in value for value in env.values())
        # It submitted a subtask under itself.
        assert seen["submit"]["code"] == 0, seen["submit"]["err"]
        child = json.loads(seen["submit"]["out"])
        assert http.get(f"/api/tasks/{child['id']}").json()["parent_id"] == parent["id"]
        # It cannot touch a task outside its subtree, which looks unknown to it.
        assert seen["cancel_other"]["code"] == 1
        assert "no task matches" in seen["cancel_other"]["err"]
        assert http.get(f"/api/tasks/{other['id']}").json()["status"] == "held"
        # It reads the queue status.
        assert seen["status"]["code"] == 0, seen["status"]["err"]
        until(
            lambda: http.get(f"/api/tasks/{parent['id']}").json()["status"] == "succeeded",
            what="the run ending",
        )
    # Its token dies with the attempt.
    with server.client(env["SLOTLINE_TOKEN"]) as http:
        refused = http.get(f"/api/tasks/{parent['id']}")
        assert refused.status_code == 401
        assert "attempt has ended" in refused.json()["detail"]


def test_a_task_token_sees_and_steers_only_its_subtree(make_server: ServerFactory) -> None:
    server = make_server()
    admin = server.token("root", "admin")
    store = server.store
    with server.client(admin) as http:
        parent = http.post("/api/tasks", json={"command": ["true"], "user": "ann"}).json()
        claim = store.claim("external:test", limit=1).claims
        assert [c.task.id for c in claim] == [parent["id"]]
        outside = http.post("/api/tasks", json={"command": ["true"], "hold": True}).json()
    token = build_env(claim[0].task, claim[0].attempt, "", api_url=server.url)["SLOTLINE_TOKEN"]
    with server.client(token) as http:
        child = http.post("/api/tasks", json={"command": ["true"], "hold": True}).json()
        assert (child["parent_id"], child["user"]) == (parent["id"], "ann")
        grandchild = http.post(
            "/api/tasks", json={"command": ["true"], "parent_id": child["id"][:8]}
        ).json()
        assert grandchild["parent_id"] == child["id"]
        assert http.post("/api/tasks", json={"command": ["true"], "user": "bob"}).status_code == 403
        elsewhere = http.post("/api/tasks", json={"command": ["true"], "parent_id": outside["id"]})
        assert elsewhere.status_code == 404
        listed = {t["id"] for t in http.get("/api/tasks").json()["tasks"]}
        assert listed == {parent["id"], child["id"], grandchild["id"]}
        assert http.post(f"/api/tasks/{outside['id']}/cancel").status_code == 404
        assert http.post(f"/api/tasks/{child['id']}/release").status_code == 200
        assert http.post("/api/pause").status_code == 403
        assert http.get("/api/status").status_code == 200
        # Metrics count every user's tasks: refused, like a user's, unless shared.
        seen = http.get("/metrics")
        assert seen.status_code == 403
        assert "share_totals" in seen.json()["detail"]
    store.finish(claim[0].attempt.id, claim[0].attempt.token, 0, None)
    with server.client(token) as http:
        assert http.get("/api/status").status_code == 401


def test_a_run_gets_the_store_only_when_it_holds_no_secret(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s.db")
    try:
        store.submit({"command": ["true"]})
        (claim,) = store.claim("n", limit=1).claims
        task, attempt = claim.task, claim.attempt
        sqlite = build_env(task, attempt, str(tmp_path / "s.db"), base={})
        assert sqlite["SLOTLINE_STORE"] == str(tmp_path / "s.db")
        for secret in ("postgresql://me:pw@db/q", "postgresql://me@db/q?password=pw"):
            assert "SLOTLINE_STORE" not in build_env(task, attempt, secret, base={})
        no_password = build_env(task, attempt, "postgresql://me@db/q", base={})
        assert no_password["SLOTLINE_STORE"] == "postgresql://me@db/q"
        served = build_env(task, attempt, "postgresql://me:pw@db/q", base={}, api_url="http://x")
        assert "SLOTLINE_STORE" not in served
        assert served["SLOTLINE_URL"] == "http://x"
        assert task.status is Status.RUNNING
    finally:
        store.close()
