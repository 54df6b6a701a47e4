"""What a user token may choose (`users:` in slotline.yaml, slotline/reach.py): where its
runs happen, which repository a worktree task names, how many runs it starts over the
limit, which functions and external tasks it submits; over HTTP and over MCP alike.
(Merge targets are in test_landing_http.py, beside the other merge rules.)"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from gitrepos import make_repo
from slotline.config.file import Config, load_config
from slotline.errors import InvalidInput
from slotline.reach import UsersConfig
from slotline.runner.env import build_env

from .conftest import Running, ServerFactory, mcp_tool

AGENTS = {"echoer": {"command": ["echo", "{prompt}"]}}


def config(**users: Any) -> Config:
    return Config.model_validate({"agents": AGENTS, "users": users})


def test_a_user_runs_only_in_the_workspaces_the_admin_allows(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # Given an allowed folder, with a symlink in it that leads out
    allowed = tmp_path / "src"
    (allowed / "app").mkdir(parents=True)
    (allowed / "out").symlink_to("/etc")
    server = make_server(config=config(workspaces=[str(allowed)]))
    user, admin = server.token("ann", "user"), server.token("root", "admin")
    typed = {"agent": "echoer", "prompt": "hi"}

    with server.client(user) as http:
        # When ann names a workspace outside it, through `..` or through the symlink
        for workspace in ("/etc", "/root", f"{allowed}/../../etc", f"{allowed}/out"):
            refused = http.post("/api/tasks", json={**typed, "workspace": workspace})
            # Then it is refused, naming the field, the value and what is allowed
            assert refused.status_code == 403, workspace
            assert refused.json()["type"] == "Forbidden"
            detail = refused.json()["detail"]
            assert f"workspace {os.path.normpath(workspace)} is not among" in detail
            assert f"(users.workspaces: {allowed})" in detail
        batch = [{**typed, "workspace": str(allowed)}, {**typed, "workspace": "/etc"}]
        assert http.post("/api/tasks/batch", json={"tasks": batch}).status_code == 403
        # while the allowed folder, one below it, and no workspace at all are accepted
        for extra in ({"workspace": str(allowed)}, {"workspace": f"{allowed}/app"}, {}):
            assert http.post("/api/tasks", json={**typed, **extra}).status_code == 201, extra
    failed, said = mcp_tool(
        server, user, "submit_task", agent="echoer", prompt="x", workspace="/etc"
    )
    assert failed
    assert "not allowed: workspace /etc is not among the workspaces users may choose" in said
    with server.client(admin) as http:  # an admin chooses anything
        assert http.post("/api/tasks", json={**typed, "workspace": "/etc"}).status_code == 201
    assert len(server.store.list_tasks()) == 4


def test_by_default_a_user_chooses_no_workspace(make_server: ServerFactory) -> None:
    server = make_server(config=config())
    with server.client(server.token("ann", "user")) as http:
        refused = http.post("/api/tasks", json={"agent": "echoer", "prompt": "x", "workspace": "/"})
        assert refused.status_code == 403
        assert refused.json()["detail"].endswith("(users.workspaces: none)")
        assert http.post("/api/tasks", json={"agent": "echoer", "prompt": "x"}).status_code == 201


def test_open_mode_is_the_local_admin_and_chooses_anything(make_server: ServerFactory) -> None:
    server = make_server(config=config())
    with server.client() as http:
        typed = {"agent": "echoer", "prompt": "x", "workspace": "/etc"}
        assert http.post("/api/tasks", json=typed).status_code == 201


def test_a_user_worktree_task_names_only_its_agent_types_or_an_allowed_repository(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # Given an agent type with its own repository, another listed one, and one not listed
    own = make_repo(tmp_path / "own", {"a.txt": "a\n"})
    listed = make_repo(tmp_path / "listed", {"a.txt": "a\n"})
    other = make_repo(tmp_path / "other", {"a.txt": "a\n"})
    agents = {"coder": {"command": ["echo", "{prompt}"], "isolation": "worktree", "repo": str(own)}}
    users = {"repos": [str(listed)]}
    server = make_server(config=Config.model_validate({"agents": agents, "users": users}))
    user = server.token("ann", "user")
    typed = {"agent": "coder", "prompt": "x"}
    with server.client(user) as http:
        # When ann names the other repository, it is refused, saying which ones she may
        refused = http.post("/api/tasks", json={**typed, "repo": str(other), "base": "main"})
        assert refused.status_code == 403
        assert refused.json()["detail"] == (
            f"repo {other} is not among the repositories users may choose (the agent "
            f"type's repo, users.repos, users.workspaces: {own}, {listed})"
        )
        # while the agent type's own (named or not) and the listed one are accepted
        assert http.post("/api/tasks", json=typed).json()["repo"] == str(own)
        for repo in (own, listed):
            answer = http.post("/api/tasks", json={**typed, "repo": str(repo)})
            assert answer.status_code == 201, answer.text
            assert answer.json()["repo"] == str(repo)


def _tasks_of_ann(server: Running, count: int) -> tuple[str, list[str]]:
    """Ann's token and `count` tasks of hers, queued at a limit of 3."""
    server.store.set_setting("max_concurrent", 3)
    ann = server.token("ann", "user")
    with server.client(ann) as http:
        typed = [{"agent": "echoer", "prompt": str(n)} for n in range(count)]
        return ann, [http.post("/api/tasks", json=body).json()["id"] for body in typed]


def _five_of_ann_three_running(server: Running) -> tuple[str, list[str]]:
    """Ann's token and her five tasks at a limit of 3: the first three running (claimed
    by a node elsewhere; no process here)."""
    ann, ids = _tasks_of_ann(server, 5)
    assert len(server.store.claim("elsewhere").claims) == 3
    return ann, ids


def test_a_user_starts_nothing_over_the_limit_by_default(make_server: ServerFactory) -> None:
    server = make_server(config=config())
    ann, ids = _five_of_ann_three_running(server)
    # When ann starts her fourth task now, over HTTP, the Hephaestus route and MCP
    with server.client(ann) as http:
        refused = http.post(f"/api/tasks/{ids[3]}/bump")
        heph = http.post("/api/bump_task_priority", json={"task_id": ids[4]})
    failed, said = mcp_tool(server, ann, "start_now", task_id=ids[3])
    # Then each is refused, saying why and what she may do, and nothing is to start
    assert refused.status_code == 403, refused.text
    detail = refused.json()["detail"]
    assert f"task {ids[3][:8]} would start over the limit (all 3 slots are taken," in detail
    assert "(users.start_now: 0; user 'ann' has 0): an admin may start it now, or boost" in detail
    assert heph.status_code == 403, heph.text
    assert failed
    assert f"not allowed: start now: task {ids[3][:8]} would start over the limit" in said
    assert not any(t.start_now for t in server.store.list_tasks())
    # while an admin's start now goes over the limit as before
    with server.client(server.token("root", "admin")) as http:
        assert http.post(f"/api/tasks/{ids[3]}/bump").status_code == 200


def test_a_user_starts_over_the_limit_within_the_admins_allowance(
    make_server: ServerFactory,
) -> None:
    server = make_server(config=config(start_now=1))
    ann, ids = _five_of_ann_three_running(server)
    with server.client(ann) as http:
        assert http.post(f"/api/tasks/{ids[3]}/bump").status_code == 200
        # one bumped and not started yet counts: a second is past the allowance
        refused = http.post(f"/api/tasks/{ids[4]}/bump")
        assert refused.status_code == 403
        assert "(users.start_now: 1; user 'ann' has 1)" in refused.json()["detail"]
        (started,) = server.store.claim("elsewhere").claims
        assert started.attempt.over_limit
        # and so does one running over the limit
        assert http.post(f"/api/tasks/{ids[4]}/bump").status_code == 403


def test_a_user_starts_now_freely_where_the_limit_has_room(make_server: ServerFactory) -> None:
    server = make_server(config=config())
    ann, ids = _tasks_of_ann(server, 3)
    with server.client(ann) as http:
        assert http.post(f"/api/tasks/{ids[2]}/bump").status_code == 200
        assert http.post(f"/api/tasks/{ids[1]}/bump").status_code == 200
    started = server.store.claim("elsewhere").claims
    assert {c.task.id for c in started} == set(ids)
    assert not any(c.attempt.over_limit for c in started)


def test_functions_and_external_tasks_are_for_admins_unless_allowed(
    make_server: ServerFactory,
) -> None:
    # Given raw commands for admins (the default) and one pattern of functions users may call
    server = make_server(config=config(functions=["mypkg.safe_*"]))
    ann = server.token("ann", "user")
    with server.client(ann) as http:
        # When ann submits another function, or an external task, it is refused
        refused = http.post("/api/tasks", json={"callable": "os.system", "args": {"c": "id"}})
        assert refused.status_code == 403
        assert refused.json()["detail"] == (
            "callable os.system is not among the functions users may call "
            "(users.functions: mypkg.safe_*)"
        )
        external = http.post("/api/tasks", json={"kind": "external", "title": "x"})
        assert external.status_code == 403
        assert "users.external: false" in external.json()["detail"]
        # while the allowed function is accepted
        assert http.post("/api/tasks", json={"callable": "mypkg.safe_sum"}).status_code == 201
    with server.client(server.token("root", "admin")) as http:
        assert http.post("/api/tasks", json={"callable": "os.system"}).status_code == 201
        assert http.post("/api/tasks", json={"kind": "external"}).status_code == 201


def test_external_tasks_and_any_function_when_the_admin_says_so(
    make_server: ServerFactory,
) -> None:
    allowed = make_server(config=config(external=True, functions=["*"]))
    with allowed.client(allowed.token("ann", "user")) as http:
        assert http.post("/api/tasks", json={"kind": "external"}).status_code == 201
        assert http.post("/api/tasks", json={"callable": "any.thing"}).status_code == 201
    everyone = make_server(config=Config(raw_commands="all"))
    with everyone.client(everyone.token("bob", "user")) as http:
        assert http.post("/api/tasks", json={"callable": "any.thing"}).status_code == 201


def test_users_settings_are_checked_at_load(tmp_path: Path) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text("users:\n  workspaces: [src, ~/w]\n  merge_into:\n    app: [main]\n")
    users = load_config(path).users
    home = os.path.expanduser("~")
    assert users == UsersConfig(
        workspaces=[str(tmp_path / "src"), f"{home}/w"],
        merge_into={str(tmp_path / "app"): ["main"]},
    )
    for text, said in (
        ("users:\n  start_now: -1\n", "users.start_now"),
        ("users:\n  workspace: [/w]\n", "users.workspace"),
        ("users:\n  merge_into:\n    /r: ['-x']\n", "users.merge_into"),
        ("users:\n  functions: ['']\n", "users.functions"),
    ):
        path.write_text(text)
        with pytest.raises(InvalidInput, match=rf"slotline.yaml:\d+: {said}"):
            load_config(path)


def test_an_agent_starts_nothing_over_the_limit_through_its_task_token(
    make_server: ServerFactory,
) -> None:
    # Given ann's five tasks at a limit of 3, three running, and the task token of one run
    server = make_server(config=config())
    _five_of_ann_three_running(server)
    (running, *_) = [t for t in server.store.list_tasks() if t.status.value == "running"]
    attempt = server.store.get(running.id).attempts[-1]
    token = build_env(running, attempt, "", api_url=server.url)["SLOTLINE_TOKEN"]
    with server.client(token) as http:
        # when the agent submits a subtask and starts it now, over the limit,
        child = http.post("/api/tasks", json={"command": ["true"]}).json()
        refused = http.post(f"/api/tasks/{child['id']}/bump")
    # then it is refused as ann's own start now would be (no sandbox bounds a quota).
    assert refused.status_code == 403, refused.text
    assert "(users.start_now: 0; user 'ann' has 0)" in refused.json()["detail"]
    assert not server.store.get(child["id"]).start_now
