"""Cost, tokens and resume with `slotline serve` and a fake coding agent (tests/fake_agent.py)
that prints Claude-style JSON results: a run killed with its node (kill -9 of both)
resumes its session in its worktree; a follow-up continues a finished task's session;
`stats` and `show` sum and show what the runs spent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from e2e.conftest import Run, Serve, ok
from gitrepos import make_repo
from slotline.models import Status
from slotline.store import Store, open_store
from waiting import until

FAKE = str(Path(__file__).resolve().parent.parent / "fake_agent.py")


def write_config(tmp_path: Path, go: Path) -> None:
    agent = {
        "command": [sys.executable, FAKE, "--style", "stream", "--session", "sess-42",
                    "--wait", str(go), "--edit", "notes.txt", "--", "{prompt}"],
        "usage": {"json": {"cost_usd": "total_cost_usd", "input_tokens": "usage.input_tokens",
                           "output_tokens": "usage.output_tokens", "session_id": "session_id"}},
        "resume": [sys.executable, FAKE, "--resume", "{session_id}", "--edit", "notes.txt",
                   "--cost", "0.05", "--tokens-in", "1000", "--", "{prompt}"],
        "resume_prompt": "continue where you stopped",
        "isolation": "worktree",
        "max_attempts": 2,
    }  # fmt: skip
    aider = {
        "command": [sys.executable, FAKE, "--style", "aider", "--cost", "0.5", "--", "{prompt}"],
        "usage": {"regex": {"cost_usd": r"Cost: \$([0-9.]+) message",
                            "input_tokens": r"Tokens: ([0-9,]+) sent"}},
    }  # fmt: skip
    config = {"agents": {"claude": agent, "aider": aider}}
    (tmp_path / "slotline.yaml").write_text(json.dumps(config))  # JSON is YAML


def start_node(base_env: dict[str, str], tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "slotline", "serve", "--no-http", "--node-id", "resumer"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=base_env,
        cwd=tmp_path,
    )  # fmt: skip


def attempts(store: Store, task_id: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = store.get(task_id).to_dict()["attempts"]
    return data


@pytest.mark.timeout(240)
def test_a_run_killed_with_its_node_resumes_its_session_in_its_worktree(
    cli: Run, tmp_path: Path, store_path: Path, base_env: dict[str, str]
) -> None:
    # Given an agent type that prints its session id at once and then works until told,
    go = tmp_path / "go"
    write_config(tmp_path, go)
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    node = start_node(base_env, tmp_path)
    assert node.stdout is not None
    assert "max_concurrent" in node.stdout.readline()  # it is up
    store = open_store(store_path)
    task = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "fix it",
                  "--workspace", str(repo)))  # fmt: skip
    log = until(lambda: (a := attempts(store, task["id"])) and a[0]["pid"] and a[0]["log_path"])
    until(lambda: "sess-42" in Path(log).read_text(), what="the session id in the log")
    first = store.get(task["id"]).attempts[0]
    assert first.pid is not None
    # When the node is killed -9, then its agent (the keeper's whole process group),
    node.send_signal(signal.SIGKILL)
    node.communicate(timeout=30)
    os.killpg(first.pid, signal.SIGKILL)
    until(lambda: not os.path.exists(f"/proc/{first.pid}") or _zombie(first.pid))
    # and the node starts again (the same node id: it finds its own attempts),
    node = start_node(base_env, tmp_path)
    try:
        _resumed(cli, store, task, repo)
    finally:
        node.send_signal(signal.SIGTERM)
        node.communicate(timeout=30)
    store.close()


def _resumed(cli: Run, store: Store, task: dict[str, Any], repo: Path) -> None:
    # Then the interrupted run is marked resumable with its session id, and the next
    # attempt runs the resume template with `--resume sess-42` in the same worktree.
    done = until(lambda: (t := store.get(task["id"])).status.terminal and t)
    assert done.status is Status.SUCCEEDED, done.status_reason
    one, two = done.attempts
    assert one.session_id == "sess-42"
    assert one.resumable
    assert two.resumed_from is not None
    assert two.resumed_from.to_dict() == {"task_id": task["id"], "attempt": 1}
    assert one.worktree is not None
    assert two.worktree is not None
    assert two.worktree.path == one.worktree.path
    assert two.worktree.branch == one.worktree.branch
    notes = subprocess.run(
        ["git", "show", f"{two.worktree.branch}:notes.txt"], cwd=repo, capture_output=True,
        text=True, check=False,
    ).stdout + (Path(two.worktree.path) / "notes.txt").read_text()  # fmt: skip
    assert "fix it (resumed None)" in notes
    assert "continue where you stopped (resumed sess-42)" in notes
    log_two = Path(two.log_path or "").read_text()
    assert '"session_id": "sess-42"' in log_two
    assert two.usage is not None
    assert (two.usage.cost_usd, two.usage.input_tokens) == (0.05, 1000)
    # The started event says which session the attempt continued.
    started = [e for e in store.events(0) if e.kind == "started" and e.task_id == task["id"]]
    assert started[-1].data["resumed_from"] == {"task_id": task["id"], "attempt": 1}
    shown = ok(cli("--json", "show", task["id"]))
    assert shown["attempts"][1]["resumed_from"]["attempt"] == 1


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_followup_continues_a_finished_tasks_session_and_stats_sum_the_cost(
    cli: Run, tmp_path: Path, store_path: Path, serve: Serve
) -> None:
    # Given a finished run of an agent type with usage rules and a resume template,
    go = tmp_path / "go"
    go.touch()
    write_config(tmp_path, go)
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    serve()
    store = open_store(store_path)
    first = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "write the notes",
                   "--workspace", str(repo)))  # fmt: skip
    # When a follow-up is queued right away (it waits for the first),
    follow = ok(cli("--json", "followup", first["id"], "--prompt", "now add tests"))
    assert follow["depends_on"] == [first["id"]]
    aider = ok(cli("--json", "submit", "--agent", "aider", "--prompt", "tidy",
                   "--workspace", str(repo)))  # fmt: skip
    for task_id in (first["id"], follow["id"], aider["id"]):
        until(lambda t=task_id: store.get(t).status.terminal, what=f"{task_id} ended")
        assert store.get(task_id).status is Status.SUCCEEDED, store.get(task_id).status_reason
    # Then the follow-up ran the resume template with the first run's session, in its
    # worktree,
    one = store.get(first["id"]).attempts[0]
    two = store.get(follow["id"]).attempts[0]
    assert one.session_id == "sess-42"
    assert one.usage is not None
    assert (one.usage.cost_usd, one.usage.input_tokens, one.usage.output_tokens) == (
        0.12, 1234, 56,
    )  # fmt: skip
    assert two.resumed_from is not None
    assert two.resumed_from.task_id == first["id"]
    assert two.worktree is not None
    assert one.worktree is not None
    assert two.worktree.branch == one.worktree.branch
    notes = Path(two.worktree.path) / "notes.txt"
    assert "now add tests (resumed sess-42)" in notes.read_text()
    # and the aider-style lines were read by the regex rules;
    three = store.get(aider["id"]).attempts[0]
    assert three.usage is not None
    assert (three.usage.cost_usd, three.usage.input_tokens) == (0.5, 1234)
    # and stats sum the spend per agent type, user, workspace and day.
    spend = ok(cli("--json", "stats"))["spend"]
    assert spend["total"]["cost_usd"] == pytest.approx(0.67)
    by_agent = {row["key"]: row for row in spend["agent"]}
    assert by_agent["claude"]["cost_usd"] == pytest.approx(0.17)
    assert by_agent["claude"]["input_tokens"] == 2234
    assert by_agent["aider"]["output_tokens"] is None
    assert [row["key"] for row in spend["workspace"]] == [str(repo)]
    assert len(spend["day"]) == 1
    human = cli("stats")
    assert "$0.67" in human.out, human.out
    shown = cli("show", first["id"])
    assert "$0.12, 1,234 in, 56 out" in shown.out, shown.out
    store.close()


def test_followup_is_refused_without_a_resume_template(cli: Run, tmp_path: Path) -> None:
    write_config(tmp_path, tmp_path / "go")
    task = ok(cli("--json", "submit", "--agent", "aider", "--prompt", "tidy"))
    refused = cli("followup", task["id"], "--prompt", "more")
    assert refused.code != 0
    assert "agent type 'aider' has no resume template" in refused.err


@pytest.mark.timeout(120)
def test_a_run_ended_by_its_timeout_resumes_its_session_on_its_next_attempt(
    cli: Run, tmp_path: Path, store_path: Path, serve: Serve
) -> None:
    # Given an agent type whose first run prints its session id at once, then works until
    # a file that never comes, and a task with a timeout and a second attempt,
    write_config(tmp_path, tmp_path / "never")
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    ok(cli("--json", "limits", "--set", "retry_backoff_max=0"))  # retry at once
    serve()
    store = open_store(store_path)
    try:
        # When its timeout ends the first run,
        task = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "fix it",
                      "--workspace", str(repo), "--timeout", "3"))  # fmt: skip
        # Then the next attempt runs the resume template with its session id, and succeeds.
        done = until(lambda: (t := store.get(task["id"])).status.terminal and t, timeout=60)
        assert done.status is Status.SUCCEEDED, done.status_reason
        one, two = done.attempts
        assert "timed out" in (one.reason or "")
        assert one.session_id == "sess-42"
        assert one.resumable
        assert two.resumed_from is not None
        assert two.resumed_from.to_dict() == {"task_id": task["id"], "attempt": 1}
        assert one.worktree is not None
        assert two.worktree is not None
        assert two.worktree.path == one.worktree.path
        notes = (Path(two.worktree.path) / "notes.txt").read_text()
        assert "continue where you stopped (resumed sess-42)" in notes
    finally:
        store.close()
