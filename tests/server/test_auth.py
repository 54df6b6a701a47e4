"""Tokens and roles: stored hashed, checked on every route and the WebSocket."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from slotline.config.file import Config, load_config
from slotline.errors import InvalidInput
from slotline.server import ServerOptions, create_token, revoke_token, serve_http, verify_token
from slotline.server.auth import TokenBook, list_tokens
from slotline.server.listen import check_bind

from .conftest import Running, ServerFactory


def ws_url(server: Running, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


def test_tokens_are_stored_hashed_in_a_private_file(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "tokens.json"
    token = create_token("ann", "user", path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token not in path.read_text()
    stored = json.loads(path.read_text())["tokens"][0]
    assert (stored["name"], stored["role"], len(stored["sha256"])) == ("ann", "user", 64)
    found = verify_token(token, path)
    assert found is not None
    assert (found.name, found.role) == ("ann", "user")
    assert verify_token(token + "x", path) is None
    assert [t.name for t in list_tokens(path)] == ["ann"]


def test_token_names_and_roles_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    create_token("ann", "admin", path)
    with pytest.raises(InvalidInput, match="exists"):
        create_token("ann", "viewer", path)
    with pytest.raises(InvalidInput, match="unknown role"):
        create_token("bob", "root", path)
    with pytest.raises(InvalidInput, match="token name"):
        create_token("has space", "user", path)
    assert revoke_token("ann", path) is True
    assert revoke_token("ann", path) is False
    assert not TokenBook(path).has_tokens()


def test_a_token_replaced_within_one_clock_tick_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One clock reading for both tokens: the file keeps its size to the byte.
    monkeypatch.setattr("slotline.server.auth.utcnow", lambda: 1_700_000_000.5)
    path = tmp_path / "tokens.json"
    old = create_token("ann", "admin", path)
    book = TokenBook(path)
    assert book.verify(old) is not None
    before = path.stat()
    # Revoked and created again: same name, same size, and (a coarse clock) same mtime.
    revoke_token("ann", path)
    new = create_token("ann", "admin", path)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert book.verify(old) is None
    assert book.verify(new) is not None


def test_every_route_needs_a_valid_token_once_one_exists(server: Running) -> None:
    admin = server.token("root", "admin")
    with server.client() as anonymous:
        refused = anonymous.get("/api/tasks")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert anonymous.get("/metrics").status_code == 401
        assert anonymous.post("/api/bump_task_priority", json={"task_id": "ab"}).status_code == 401
        assert anonymous.get("/healthz").status_code == 200
        assert anonymous.get("/readyz").status_code == 200
    with server.client("slt_wrong") as wrong:
        assert wrong.get("/api/tasks").status_code == 401
    with server.client(admin) as http:
        assert http.get("/api/tasks").status_code == 200


def test_viewer_reads_but_cannot_change(server: Running) -> None:
    admin = server.token("root", "admin")
    viewer = server.token("watcher", "viewer")
    with server.client(admin) as http:
        task = http.post("/api/tasks", json={"command": ["true"], "user": "ann"}).json()
    with server.client(viewer) as http:
        assert http.get(f"/api/tasks/{task['id']}").status_code == 200
        assert http.get("/api/status").json()["queued"][0]["id"] == task["id"]
        for path in (f"/api/tasks/{task['id']}/cancel", "/api/pause", "/api/tasks"):
            response = http.post(path, json={"command": ["true"]})
            assert response.status_code == 403, path
            assert "viewer" in response.json()["detail"] or "admin" in response.json()["detail"]


def test_users_see_and_steer_only_their_own_tasks(make_server: ServerFactory) -> None:
    server = make_server(config=Config(raw_commands="all"))
    ann = server.token("ann", "user")
    bob = server.token("bob", "user")
    with server.client(ann) as http:
        mine = http.post("/api/tasks", json={"command": ["true"], "title": "ann's"}).json()
        assert mine["user"] == "ann"
        other = http.post("/api/tasks", json={"command": ["true"], "user": "bob"})
        assert other.status_code == 403
    with server.client(bob) as http:
        theirs = http.post("/api/tasks", json={"command": ["true"], "title": "bob's"}).json()
        assert [t["title"] for t in http.get("/api/tasks").json()["tasks"]] == ["bob's"]
        assert http.get("/api/tasks").json()["total"] == 1
        # Another user's task is no place to continue from, and the filter cannot widen
        # the scope.
        assert http.get("/api/tasks", params={"after": mine["id"]}).status_code == 404
        assert http.get("/api/tasks", params={"user": "ann"}).json()["tasks"] == []
        assert http.get(f"/api/tasks/{mine['id']}").status_code == 404
        assert http.post(f"/api/tasks/{mine['id']}/cancel").status_code == 404
        assert http.post("/api/pause").status_code == 403
        status = http.get("/api/status").json()
        assert [t["title"] for t in status["queued"]] == ["bob's"]
        assert status["queued"][0]["position"] == 2
        # The line's length, not whose tasks are in it; the first in line is ann's.
        assert status["queued_total"] == 2
        assert status["next_up"] is None
        line = http.get("/api/line").json()
        assert [t["id"] for t in line["queued"]] == [theirs["id"]]
        assert line["next_up"] is None
        queue = http.get("/api/queue_status").json()
        assert [t["task_id"] for t in queue["queued_tasks"]] == [theirs["id"]]
        kinds = {e["task_id"] for e in http.get("/api/events").json()["events"]}
        assert kinds == {theirs["id"]}
        assert http.post(f"/api/tasks/{theirs['id']}/hold").json()["status"] == "held"
    with server.client(ann) as http:
        status = http.get("/api/status").json()
        assert (status["queued_total"], status["next_up"]) == (1, mine["id"])
        assert http.get("/api/line").json()["next_up"] == mine["id"]


def test_raw_commands_can_be_kept_for_admins(make_server: ServerFactory, tmp_path: Path) -> None:
    config_file = tmp_path / "slotline.yaml"
    config_file.write_text("agents:\n  echoer:\n    command: [echo, '{prompt}']\n    timeout: 60\n")
    server = make_server(
        options=ServerOptions(raw_commands_admin_only=True), config=load_config(config_file)
    )
    user = server.token("ann", "user")
    admin = server.token("root", "admin")
    with server.client(user) as http:
        raw = http.post("/api/tasks", json={"command": ["rm", "-rf", "/tmp/x"]})
        assert raw.status_code == 403
        assert "agent type" in raw.json()["detail"]
        typed = http.post("/api/tasks", json={"agent": "echoer", "prompt": "fix it; rm -rf /"})
        assert typed.status_code == 201
        assert typed.json()["command"] == ["echo", "fix it; rm -rf /"]
        assert typed.json()["timeout"] == 60
        env = {"agent": "echoer", "prompt": "x", "env": {"LD_PRELOAD": "/tmp/evil.so"}}
        assert http.post("/api/tasks", json=env).status_code == 403
        unknown = http.post("/api/tasks", json={"agent": "nope", "prompt": "x"})
        assert unknown.status_code == 422
        assert "echoer" in unknown.json()["detail"]
    with server.client(admin) as http:
        assert http.post("/api/tasks", json={"command": ["true"]}).status_code == 201


def test_a_public_address_is_refused_without_tokens(tmp_path: Path) -> None:
    options = ServerOptions(tokens_path=tmp_path / "tokens.json")
    with pytest.raises(InvalidInput, match="slotline token create"):
        asyncio.run(serve_http(None, None, "0.0.0.0", 0, options=options))
    book = TokenBook(tmp_path / "tokens.json")
    check_bind("127.0.0.1", book)
    check_bind("::1", book)
    check_bind("localhost", book)
    create_token("root", "admin", tmp_path / "tokens.json")
    check_bind("0.0.0.0", book)


def test_a_public_server_stays_closed_when_every_token_is_revoked(
    make_server: ServerFactory,
) -> None:
    server = make_server(options=ServerOptions(require_tokens=True))
    with server.client() as http:
        refused = http.get("/api/status")
        assert refused.status_code == 401
        assert "slotline token create" in refused.json()["detail"]
        assert http.get("/healthz").status_code == 200


def test_websocket_checks_origin_and_token(server: Running) -> None:
    url = ws_url(server, "/api/events/ws?since=0")
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin="http://evil.example", open_timeout=10).close()
    assert refused.value.response.status_code == 403
    host = server.url.removeprefix("http://")
    with connect(url, origin=f"http://{host}", open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "heartbeat"
    token = server.token("root", "admin")
    with pytest.raises(InvalidStatus):
        connect(url, open_timeout=10).close()
    with pytest.raises(InvalidStatus):  # a token in the URL is refused: URLs get logged
        connect(url + f"&token={token}", open_timeout=10).close()
    # A browser offers the token as a subprotocol beside `slotline`, accepted as `slotline`.
    offered = [Subprotocol("slotline"), Subprotocol(f"slotline-token.{token}")]
    with connect(url, subprotocols=offered, open_timeout=10) as ws:
        assert ws.subprotocol == "slotline"
        assert json.loads(ws.recv(timeout=10))["type"] == "heartbeat"
    headers = {"Authorization": f"Bearer {token}"}
    with connect(url, additional_headers=headers, open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "heartbeat"


def test_a_token_in_the_url_is_refused_saying_why(server: Running) -> None:
    token = server.token("root", "admin")
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.get("/api/events/stream").status_code == 401
        refused = http.get("/api/tasks", params={"token": token})
        assert refused.status_code == 401
        assert "Authorization: Bearer" in refused.json()["detail"]
        with http.stream("GET", "/api/events/stream", params={"token": token}) as response:
            assert response.status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        with http.stream("GET", "/api/events/stream", headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
