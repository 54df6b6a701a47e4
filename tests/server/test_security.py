"""The server's guards against browsers and other users: Host and Origin checks (DNS
rebinding, cross-site requests), raw commands from slotline.yaml, and what a user token
may name when it submits (others' tasks, agent types outside the global pool)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from slotline.config.file import Config, load_config
from slotline.errors import InvalidInput
from slotline.models import Status
from slotline.runner.env import build_env
from slotline.server import ServerOptions, create_app
from slotline.server.context import ServerState
from slotline.store import open_store

from .conftest import Running, ServerFactory

ECHO = ["echo", "hi"]


def port_of(server: Running) -> int:
    port = urlsplit(server.url).port
    assert port is not None
    return port


def write_config(tmp_path: Path, text: str) -> Config:
    path = tmp_path / "slotline.yaml"
    path.write_text(text)
    return load_config(path)


# -- Host: DNS rebinding -------------------------------------------------------------------


def test_a_foreign_host_is_refused_before_anything_happens(
    server: Running, http: httpx.Client
) -> None:
    port = port_of(server)
    for host in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1.nip.io:{port}"):
        refused = http.post("/api/tasks", json={"command": ECHO}, headers={"Host": host})
        assert refused.status_code == 400, host
        assert refused.json()["type"] == "UnknownHost"
        assert repr(host) in refused.json()["detail"]
        assert f"127.0.0.1:{port}" in refused.json()["detail"]
    assert http.get("/api/status", headers={"Host": "attacker.example"}).status_code == 400
    assert http.get("/openapi.json", headers={"Host": "attacker.example"}).status_code == 400
    assert server.store.list_tasks() == []


def test_loopback_names_with_the_bound_port_are_served(server: Running, http: httpx.Client) -> None:
    port = port_of(server)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LocalHost:{port}", f"[::1]:{port}"):
        assert http.get("/api/status", headers={"Host": host}).status_code == 200, host
    for host in ("127.0.0.1", "localhost", f"localhost:{port + 1}", "[::1]", "[::1]:x"):
        assert http.get("/api/status", headers={"Host": host}).status_code == 400, host


def test_probes_answer_whatever_the_host(server: Running, http: httpx.Client) -> None:
    for path in ("/healthz", "/readyz"):
        assert http.get(path, headers={"Host": "10.1.2.3:9999"}).status_code == 200


def test_allowed_hosts_extend_the_names(make_server: ServerFactory) -> None:
    server = make_server(options=ServerOptions(allowed_hosts=("slotline.lan", "proxy:443")))
    port = port_of(server)
    with server.client() as http:
        for host in ("slotline.lan", f"slotline.lan:{port}", "SLOTLINE.LAN:8080", "proxy:443"):
            assert http.get("/api/status", headers={"Host": host}).status_code == 200, host
        for host in ("proxy", f"proxy:{port}", "other.lan"):
            assert http.get("/api/status", headers={"Host": host}).status_code == 400, host
    anything = make_server(options=ServerOptions(allowed_hosts=("*",)))
    with anything.client() as http:
        assert http.get("/api/status", headers={"Host": "any.example"}).status_code == 200


def test_a_rebound_websocket_is_refused(server: Running) -> None:
    port = port_of(server)
    # What a browser sends after attacker.example was rebound to 127.0.0.1.
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    with pytest.raises(InvalidStatus) as refused:
        connect(f"ws://attacker.example:{port}/api/events/ws", sock=sock, open_timeout=10)
    assert refused.value.response.status_code in (400, 403)


# -- Origin: cross-site requests -------------------------------------------------------------


def test_a_cross_site_simple_post_is_refused(server: Running, http: httpx.Client) -> None:
    task = http.post("/api/tasks", json={"command": ECHO}).json()
    # A form or fetch(..., {mode: "no-cors"}) from another site: no body, no preflight.
    refused = http.post("/api/clear", headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403
    assert refused.json()["type"] == "Forbidden"
    assert "'http://evil.example'" in refused.json()["detail"]
    assert server.store.get(task["id"]).status is Status.QUEUED
    for origin in ("null", f"http://localhost:{port_of(server)}", "https://127.0.0.1"):
        response = http.post("/api/tasks", json={"command": ECHO}, headers={"Origin": origin})
        assert response.status_code == 403, origin
    assert len(server.store.list_tasks()) == 1


def test_the_servers_own_origin_and_scripts_may_change_things(
    server: Running, http: httpx.Client
) -> None:
    own = server.url
    response = http.post("/api/tasks", json={"command": ECHO}, headers={"Origin": own})
    assert response.status_code == 201
    assert http.post("/api/clear").json() == {"cancelled": 1}  # no Origin: not a browser
    # Reads are not refused: without CORS headers a foreign page cannot read the answer.
    assert http.get("/api/status", headers={"Origin": "http://evil.example"}).status_code == 200


def test_allowed_origins_may_change_things(make_server: ServerFactory) -> None:
    server = make_server(options=ServerOptions(allowed_origins=("https://dash.example",)))
    with server.client() as http:
        ok = http.post("/api/pause", headers={"Origin": "https://dash.example"})
        assert ok.status_code == 200
        refused = http.post("/api/resume", headers={"Origin": "https://evil.example"})
        assert refused.status_code == 403


def test_the_websocket_refuses_foreign_origins_and_allows_listed_ones(
    make_server: ServerFactory,
) -> None:
    options = ServerOptions(allowed_origins=("https://dash.example",), heartbeat=0.5)
    server = make_server(options=options)
    url = server.url.replace("http://", "ws://") + "/api/events/ws?since=0"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin=Origin("http://evil.example"), open_timeout=10).close()
    assert refused.value.response.status_code == 403
    with connect(url, origin=Origin("https://dash.example"), open_timeout=10) as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "heartbeat"


# -- raw commands from slotline.yaml ---------------------------------------------------------


def test_raw_commands_follow_the_configuration(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store.db")
    try:

        def admin_only(config: Config | None, options: ServerOptions | None = None) -> bool:
            state: ServerState = create_app(store, config, options).state.slotline
            return state.raw_commands_admin_only

        assert admin_only(None) is True
        assert admin_only(write_config(tmp_path, "raw_commands: admins\n")) is True
        assert admin_only(write_config(tmp_path, "raw_commands: all\n")) is False
        explicit = ServerOptions(raw_commands_admin_only=False)
        assert admin_only(Config(raw_commands="admins"), explicit) is False
    finally:
        store.close()
    with pytest.raises(InvalidInput, match="raw_commands"):
        write_config(tmp_path, "raw_commands: everyone\n")


def test_the_configured_key_reaches_the_running_server(make_server: ServerFactory) -> None:
    admins = make_server(config=Config(raw_commands="admins"))
    user = admins.token("ann", "user")
    with admins.client(user) as http:
        raw = http.post("/api/tasks", json={"command": ECHO})
        assert raw.status_code == 403
        assert "admins" in raw.json()["detail"]
    with admins.client(admins.token("root", "admin")) as http:
        assert http.post("/api/tasks", json={"command": ECHO}).status_code == 201
        assert http.get("/api/config").json()["raw_commands"] == "admins"


def test_raw_commands_all_lets_users_submit_commands(make_server: ServerFactory) -> None:
    server = make_server(config=Config(raw_commands="all"))
    with server.client(server.token("ann", "user")) as http:
        assert http.post("/api/tasks", json={"command": ECHO}).status_code == 201


# -- what a user may name when submitting ----------------------------------------------------


def refusal(response: httpx.Response) -> tuple[int, str, str]:
    body: dict[str, Any] = response.json()
    return response.status_code, body["type"], body["detail"]


def test_users_cannot_depend_on_or_attach_to_others_tasks(make_server: ServerFactory) -> None:
    server = make_server(config=Config(raw_commands="all"))
    ann = server.token("ann", "user")
    bob = server.token("bob", "user")
    with server.client(bob) as http:
        theirs = http.post("/api/tasks", json={"command": ECHO}).json()
    server.store.cancel(theirs["id"])  # an ended task: its status would show in the reason
    unknown = "0" * 32
    with server.client(ann) as http:
        mine = http.post("/api/tasks", json={"command": ECHO}).json()
        for ref in (theirs["id"], theirs["id"][:8]):
            hidden = http.post("/api/tasks", json={"command": ECHO, "depends_on": [ref]})
            missing = http.post("/api/tasks", json={"command": ECHO, "depends_on": [unknown]})
            assert refusal(hidden)[:2] == refusal(missing)[:2] == (422, "UnknownDependency")
            assert refusal(hidden)[2] == refusal(missing)[2].replace(unknown, ref)
            hidden = http.post("/api/tasks", json={"command": ECHO, "parent_id": ref})
            missing = http.post("/api/tasks", json={"command": ECHO, "parent_id": unknown})
            assert refusal(hidden)[:2] == refusal(missing)[:2] == (404, "NotFound")
            assert refusal(hidden)[2] == refusal(missing)[2].replace(unknown, ref)
        batch = [{"command": ECHO}, {"command": ECHO, "parent_id": theirs["id"]}]
        assert http.post("/api/tasks/batch", json={"tasks": batch}).status_code == 404
        child = http.post(
            "/api/tasks",
            json={"command": ECHO, "parent_id": mine["id"][:8], "depends_on": [mine["id"][:8]]},
        )
        assert child.status_code == 201, child.text
        assert (child.json()["parent_id"], child.json()["depends_on"]) == (mine["id"], [mine["id"]])
    assert sorted(t.user or "" for t in server.store.list_tasks()) == ["ann", "ann", "bob"]
    with server.client(server.token("root", "admin")) as http:
        linked = {"command": ECHO, "parent_id": theirs["id"], "depends_on": [mine["id"]]}
        assert http.post("/api/tasks", json=linked).status_code == 201


EXEMPT_CONFIG = """\
raw_commands: all
agents:
  pm:
    command: [echo, "{prompt}"]
    global_pool: false
  coder:
    command: [echo, "{prompt}"]
"""


def test_users_reach_out_of_pool_agents_only_through_their_type(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    server = make_server(config=write_config(tmp_path, EXEMPT_CONFIG))
    admin = server.token("root", "admin")
    with server.client(admin) as http:
        limits = http.post("/api/limits", json={"exempt_agents": ["pm", "sidecar"]})
        assert limits.status_code == 200
    with server.client(server.token("ann", "user")) as http:
        for body in (
            {"command": ["python", "-c", "print(1)"], "agent": "pm"},
            {"command": ["python", "-c", "print(1)"], "agent": "sidecar"},
            {"agent": "pm", "prompt": "plan", "env": {"LD_PRELOAD": "/tmp/x.so"}},
            {"kind": "external", "agent": "pm"},
        ):
            refused = http.post("/api/tasks", json=body)
            assert refused.status_code == 403, body
            assert "outside the global pool" in refused.json()["detail"]
        untyped = http.post("/api/tasks", json={"agent": "sidecar", "prompt": "x"})
        assert untyped.status_code == 422  # no such agent type: no way in at all
        as_type = {"agent": "pm", "prompt": "plan the work", "kind": "command"}
        typed = http.post("/api/tasks", json=as_type)
        assert typed.status_code == 201
        assert typed.json()["command"] == ["echo", "plan the work"]
        pooled = {"command": ["python", "-c", "print(1)"], "agent": "coder"}
        assert http.post("/api/tasks", json=pooled).status_code == 201
        batch = [{"agent": "pm", "prompt": "x"}, {"command": ECHO, "agent": "pm"}]
        assert http.post("/api/tasks/batch", json={"tasks": batch}).status_code == 403
    with server.client(admin) as http:
        raw = http.post("/api/tasks", json={"command": ECHO, "agent": "pm"})
        assert raw.status_code == 201


KEYED_CONFIG = """\
raw_commands: all
agents:
  claude:
    command: [echo, "{prompt}"]
    env_required: [ANTHROPIC_API_KEY]
  codex:
    command: [echo, "{prompt}"]
    env_allow: [CODEX_*]
  plain:
    command: [echo, "{prompt}"]
"""
PRINTS_ENV = ["sh", "-c", "env"]


def test_a_command_of_ones_own_never_runs_with_an_agent_types_variables(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # Given agent types whose runs get variables of the node's environment (a key), and
    # raw commands open to every user
    server = make_server(config=write_config(tmp_path, KEYED_CONFIG))
    admin = server.token("root", "admin")
    with server.client(admin) as http:
        parent = http.post("/api/tasks", json={"command": ECHO, "user": "ann"}).json()
        (claim,) = server.store.claim("external:test", limit=1).claims
        assert claim.task.id == parent["id"]
    task_token = build_env(claim.task, claim.attempt, "", api_url=server.url)["SLOTLINE_TOKEN"]
    # When a user, or a running task, labels a command of its own with such a type
    for token in (server.token("ann", "user"), task_token):
        with server.client(token) as http:
            for agent in ("claude", "codex"):
                for body in (
                    {"command": PRINTS_ENV, "agent": agent},
                    {"agent": agent, "prompt": "x", "env": {"LD_PRELOAD": "/tmp/x.so"}},
                ):
                    refused = http.post("/api/tasks", json=body)
                    # Then it is refused, in one line that says how to submit instead
                    assert refused.status_code == 403, body
                    detail = refused.json()["detail"]
                    assert detail.startswith(
                        f"agent {agent!r} passes variables of the node's environment to "
                        "its runs (env_required, env_allow): submit it only as its agent type"
                    ), detail
                    assert "\n" not in detail
            # And the type's own command with a prompt, or a command under a type that
            # passes nothing, is taken
            typed = http.post("/api/tasks", json={"agent": "claude", "prompt": "fix it"})
            assert typed.status_code == 201, typed.text
            assert typed.json()["command"] == ["echo", "fix it"]
            plain = {"command": PRINTS_ENV, "agent": "plain"}
            assert http.post("/api/tasks", json=plain).status_code == 201
    agents = [t.agent for t in server.store.list_tasks() if list(t.command) == PRINTS_ENV]
    assert agents == ["plain", "plain"]
    # An admin may label a command of its own with the type
    with server.client(admin) as http:
        raw = http.post("/api/tasks", json={"command": PRINTS_ENV, "agent": "claude"})
        assert raw.status_code == 201


def test_a_type_declared_outside_the_pool_counts_even_before_serve_applies_it(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # The fixture does not write the configuration into the store (as `slotline serve`
    # does): the server must go by slotline.yaml as well as by the store's list.
    server = make_server(config=write_config(tmp_path, EXEMPT_CONFIG))
    assert server.store.settings()["exempt_agents"] == []
    with server.client(server.token("ann", "user")) as http:
        refused = http.post("/api/tasks", json={"command": ECHO, "agent": "pm"})
        assert refused.status_code == 403


def test_allowed_hosts_from_the_configuration_are_answered(make_server: ServerFactory) -> None:
    server = make_server(config=Config(allowed_hosts=["queue.example.com"]))
    port = urlsplit(server.url).port
    with httpx.Client(base_url=server.url) as http:
        named = http.get("/api/status", headers={"Host": f"queue.example.com:{port}"})
        assert named.status_code == 200
        other = http.get("/api/status", headers={"Host": f"evil.example.com:{port}"})
        assert other.status_code == 400
