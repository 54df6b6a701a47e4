"""Cost, tokens and resume over HTTP, with a real node running a fake coding agent
(tests/fake_agent.py) that prints Claude-style JSON results: attempts[].usage and
session_id, /api/stats spend, /metrics totals, terminate with `resumable`, follow-ups."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

from gitrepos import make_repo
from server.conftest import Running, ServerFactory
from slotline.config.file import Config
from slotline.models import Usage
from waiting import until

FAKE = str(Path(__file__).resolve().parent.parent / "fake_agent.py")


def config(go: Path) -> Config:
    rules = {
        "json": {
            "cost_usd": "total_cost_usd",
            "input_tokens": "usage.input_tokens",
            "output_tokens": "usage.output_tokens",
            "session_id": "session_id",
        },
        "session_totals": ["cost_usd"],  # as Claude Code's: the session's running total
    }
    claude = {
        "command": [sys.executable, FAKE, "--style", "stream", "--session", "s-http",
                    "--wait", str(go), "--", "{prompt}"],
        "usage": rules,
        "resume": [sys.executable, FAKE, "--resume", "{session_id}", "--cost", "0.15", "--",
                   "{prompt}"],
    }  # fmt: skip
    return Config.model_validate({"agents": {"claude": claude}})


def ended(http: httpx.Client, task_id: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        task: dict[str, Any] = http.get(f"/api/tasks/{task_id}").json()
        return task if task["status"] in ("succeeded", "failed", "cancelled") else None

    return until(done, what=f"task {task_id} ended")


def start(make_server: ServerFactory, tmp_path: Path) -> tuple[Running, Path]:
    go = tmp_path / "go"
    return make_server(node=True, config=config(go)), go


def test_usage_is_shown_summed_and_exported(make_server: ServerFactory, tmp_path: Path) -> None:
    server, go = start(make_server, tmp_path)
    go.touch()
    with server.client() as http:
        task = http.post("/api/tasks", json={"agent": "claude", "prompt": "fix"}).json()
        done = ended(http, task["id"])
        assert done["status"] == "succeeded"
        (attempt,) = done["attempts"]
        assert attempt["usage"] == {
            "cost_usd": 0.12, "input_tokens": 1234, "output_tokens": 56,
            "session_totals": {"cost_usd": 0.12},
        }  # fmt: skip
        assert attempt["session_id"] == "s-http"
        spend = http.get("/api/stats").json()["spend"]
        assert spend["total"]["cost_usd"] == 0.12
        assert spend["agent"] == [
            {"key": "claude", "runs": 1, "cost_usd": 0.12, "input_tokens": 1234,
             "output_tokens": 56, "denied": 0},
        ]  # fmt: skip
        metrics = http.get("/metrics").text
    assert 'slotline_cost_usd_total{agent="claude"} 0.12' in metrics
    assert 'slotline_tokens_total{agent="claude",direction="input"} 1234.0' in metrics
    assert 'slotline_tokens_total{agent="claude",direction="output"} 56.0' in metrics


def test_terminate_resumable_then_restart_resumes_the_session(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    server, _ = start(make_server, tmp_path)  # `go` never appears: the run waits
    with server.client() as http:
        task = http.post("/api/tasks", json={"agent": "claude", "prompt": "fix"}).json()

        def printed_session() -> bool:
            attempts = http.get(f"/api/tasks/{task['id']}").json()["attempts"]
            path = attempts[0]["log_path"] if attempts else None
            return bool(path) and "s-http" in Path(path).read_text()

        until(printed_session, what="the session id in the log")
        stopped = http.post(f"/api/tasks/{task['id']}/terminate", json={"resumable": True})
        assert stopped.status_code == 200, stopped.text
        first = ended(http, task["id"])
        assert first["status"] == "failed"
        assert first["attempts"][0]["resumable"] is True
        assert first["attempts"][0]["session_id"] == "s-http"
        assert http.post(f"/api/tasks/{task['id']}/restart").status_code == 200
        until(lambda: len(http.get(f"/api/tasks/{task['id']}").json()["attempts"]) == 2)
        again = ended(http, task["id"])
    assert again["status"] == "succeeded"
    second = again["attempts"][1]
    assert second["resumed_from"] == {"task_id": task["id"], "attempt": 1}
    # the first attempt was cut before it printed any total: the session's is the run's
    assert second["usage"]["cost_usd"] == 0.15
    assert '"session_id": "s-http"' in Path(second["log_path"]).read_text()


def test_followup_over_http(make_server: ServerFactory, tmp_path: Path) -> None:
    server, go = start(make_server, tmp_path)
    go.touch()
    with server.client() as http:
        task = http.post("/api/tasks", json={"agent": "claude", "prompt": "fix"}).json()
        made = http.post(f"/api/tasks/{task['id']}/followup", json={"prompt": "and test it"})
        assert made.status_code == 201, made.text
        follow = ended(http, made.json()["id"])
        assert follow["status"] == "succeeded", follow["status_reason"]
        assert follow["attempts"][0]["resumed_from"] == {"task_id": task["id"], "attempt": 1}
        assert follow["depends_on"] == [task["id"]]
        # it printed the session's total cost, and costs what it added to the first run's
        assert follow["attempts"][0]["usage"]["session_totals"] == {"cost_usd": 0.15}
        assert follow["attempts"][0]["usage"]["cost_usd"] == 0.03
        empty = http.post(f"/api/tasks/{task['id']}/followup", json={"prompt": ""})
        assert empty.status_code == 422


def test_a_user_sees_the_spend_of_their_own_runs_only(server: Running) -> None:
    # Given runs of two users that reported what they spent,
    store = server.store
    for user, cost in (("alice", 1.5), ("bob", 4.0)):
        store.submit({"command": ["true"], "user": user, "agent": "claude"})
        (claim,) = store.claim("node-a").claims
        store.finish(claim.attempt.id, claim.attempt.token, 0, usage=Usage(cost, 10, 1))
    alice = server.token("alice", "user")
    # when each asks for the stats, then a user's spend counts only their own runs,
    with server.client(alice) as http:
        mine = http.get("/api/stats").json()["spend"]
    assert mine["total"] == {
        "key": "total", "runs": 1, "cost_usd": 1.5, "input_tokens": 10, "output_tokens": 1,
        "denied": 0,
    }  # fmt: skip
    assert [row["key"] for row in mine["user"]] == ["alice"]
    # and an admin's all of them.
    with server.client(server.token("root", "admin")) as http:
        every = http.get("/api/stats").json()["spend"]
    assert every["total"]["cost_usd"] == 5.5
    assert [row["key"] for row in every["user"]] == ["alice", "bob"]


def test_terminate_resumable_keeps_the_worktree_its_restart_resumes_in(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    # Given a worktree run whose policy removes its worktree whatever the outcome,
    repo = make_repo(tmp_path / "repo")
    server, _ = start(make_server, tmp_path)  # `go` never appears: the run waits
    spec = {"agent": "claude", "prompt": "fix", "isolation": "worktree", "repo": str(repo),
            "keep": "never"}  # fmt: skip
    with server.client() as http:
        task = http.post("/api/tasks", json=spec).json()

        def printed_session() -> bool:
            attempts = http.get(f"/api/tasks/{task['id']}").json()["attempts"]
            path = attempts[0]["log_path"] if attempts else None
            return bool(path) and "s-http" in Path(path).read_text()

        until(printed_session, what="the session id in the log")
        # when it is terminated to be resumed,
        stopped = http.post(f"/api/tasks/{task['id']}/terminate", json={"resumable": True})
        assert stopped.status_code == 200, stopped.text
        first = ended(http, task["id"])["attempts"][0]
        # then its worktree stays for the resume (not removed by `keep: never`),
        assert first["worktree"]["state"] == "kept"
        assert Path(first["worktree"]["path"]).is_dir()
        # and the restart resumes the session in that very folder.
        assert http.post(f"/api/tasks/{task['id']}/restart").status_code == 200
        until(lambda: len(http.get(f"/api/tasks/{task['id']}").json()["attempts"]) == 2)
        again = ended(http, task["id"])
    second = again["attempts"][1]
    assert second["resumed_from"] == {"task_id": task["id"], "attempt": 1}
    assert second["worktree"]["path"] == first["worktree"]["path"]
