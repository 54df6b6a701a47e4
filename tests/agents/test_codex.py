"""The real Codex CLI under a real node, as docs/coding-agents.md configures it.

Each test writes the docs' slotline.yaml as it is (`docs_agents_config()`), starts
`slotline serve`, submits to the `codex` agent type in a real git repository, and scripts
what the model answers through the OpenAI API stand-in (openai_standin.py, the Responses
API): an `exec_command` call that writes a file, a final message, a 429, a slow answer.
What the user sees (`show`, `diff`, `status`, `merge`) is checked against what Codex
printed and what the stand-in counted.

What differs from a user's machine is only its environment: a HOME whose
~/.codex/config.toml points Codex at the stand-in (a provider without WebSockets, which
the stand-in does not serve), the key in OPENAI_API_KEY, and the stand-in as the HTTP(S)
proxy, so that a request meant for any other host is seen (and refused).
"""

from __future__ import annotations

import json
import shlex
import threading
from pathlib import Path

import pytest

from gitrepos import show
from waiting import until

from .conftest import RUN_TIMEOUT, Agent, Node, installed, json_events, log_of
from .openai_standin import Call, OpenAIStandin, Refusal, Reply

API_KEY = "sk-openai-standin-key"
MODEL = "gpt-5.2-codex"

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def agent() -> Agent:
    """Codex, whose runs are passed this machine's proxy variables beside what the docs'
    codex type passes (the key)."""
    return installed("codex", reads=("OPENAI_", "CODEX_", "HTTP", "ALL_PROXY"),
                     env_allow=("*_PROXY", "*_proxy"))  # fmt: skip


@pytest.fixture
def agent_env(home: Path, api: OpenAIStandin) -> dict[str, str]:
    """Codex's variables and ~/.codex/config.toml: configured for the stand-in, the key
    set, the stand-in as the proxy."""
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "standin"\n'
        "check_for_update_on_startup = false\n\n"
        "[analytics]\n"
        "enabled = false\n\n"
        "[features]\n"
        "plugins = false\n\n"
        "[model_providers.standin]\n"
        'name = "OpenAI API stand-in"\n'
        f'base_url = "{api.base_url}"\n'
        'env_key = "OPENAI_API_KEY"\n'
        'wire_api = "responses"\n'
        "supports_websockets = false\n"
    )
    return {**api.proxy_env(), "OPENAI_API_KEY": API_KEY}


def writes(name: str, text: str, tokens: tuple[int, int] = (100, 10)) -> Reply:
    """A model answer that has Codex run a shell command writing `name`."""
    command = f"printf '%s' {shlex.quote(text)} > {name}"
    return Reply(calls=[Call("exec_command", {"cmd": command})],
                 input_tokens=tokens[0], output_tokens=tokens[1])  # fmt: skip


def test_a_worktree_run_writes_codexs_file_and_is_costed_in_tokens(
    node: Node, api: OpenAIStandin, repo: Path
) -> None:
    # Given the docs' config, and a model that has Codex write hello.txt, then says done
    node.start()
    api.answer(writes("hello.txt", "written by codex\n", (1200, 80)),
               Reply(text="I added hello.txt.", input_tokens=1500, output_tokens=30))  # fmt: skip

    # When a codex task runs
    task = node.ended(node.submit())

    # Then it succeeded, and the file is in its worktree (the sandbox let it write
    # there), not in the user's checkout
    assert task["status"] == "succeeded", task["status_reason"]
    (attempt,) = task["attempts"]
    worktree = Path(attempt["worktree"]["path"])
    assert (worktree / "hello.txt").read_text() == "written by codex\n"
    assert not (repo / "hello.txt").exists()
    # and `diff` shows it
    diff = node.diff(task["id"])
    assert "+++ b/hello.txt" in diff
    assert "+written by codex" in diff
    # Its tokens are what the stand-in reported for the two answers, as Codex printed
    # them in `turn.completed`; Codex prints no cost.
    (completed,) = [e for e in json_events(attempt) if e["type"] == "turn.completed"]
    assert completed["usage"]["input_tokens"] == 1200 + 1500
    usage = attempt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (1200 + 1500, 80 + 30)
    assert usage["cost_usd"] is None
    thread = next(e for e in json_events(attempt) if e["type"] == "thread.started")
    assert attempt["session_id"] == thread["thread_id"]
    # The key reached the API, the command ran, and Codex asked nothing of any other host
    first, second = api.model_requests()
    assert first.path == "/v1/responses"
    assert first.bearer == API_KEY
    output = next(i for i in second.body["input"] if i["type"] == "function_call_output")
    assert "exited with code 0" in output["output"], output
    assert api.outside() == [], [
        (r.method, r.path, r.headers.get("user-agent")) for r in api.outside()
    ]


def test_an_interrupted_run_resumes_its_session_and_a_followup_continues_it(
    node: Node, api: OpenAIStandin
) -> None:
    # Given a run that wrote a file, and whose next model answer is slow,
    node.start()
    api.answer(writes("hello.txt", "first\n", (200, 20)),
               Reply(text="never sent", hold=threading.Event()))  # fmt: skip
    task_id = node.submit("add hello.txt")
    until(api.held.is_set, timeout=RUN_TIMEOUT, what="Codex waiting for its answer")
    # When it is terminated as resumable, and restarted,
    node.terminate(task_id, "--resumable")
    node.ended(task_id)
    api.release()  # its CLI is gone: the answer goes nowhere
    api.answer(writes("more.txt", "resumed\n", (400, 30)),
               Reply(text="done after resuming", input_tokens=500, output_tokens=11))  # fmt: skip
    node.restart(task_id)
    task = node.ended(task_id, attempts=2)

    # Then the second attempt continued the first one's session (`codex exec resume`),
    # in the same worktree, where both files now are
    assert task["status"] == "succeeded", task["status_reason"]
    one, two = task["attempts"]
    assert one["resumable"]
    assert one["session_id"] is not None
    assert two["resumed_from"]["attempt"] == 1
    assert two["session_id"] == one["session_id"]
    assert two["worktree"]["path"] == one["worktree"]["path"]
    worktree = Path(two["worktree"]["path"])
    assert (worktree / "hello.txt").read_text() == "first\n"
    assert (worktree / "more.txt").read_text() == "resumed\n"
    resumed = api.model_requests()[-2].body["input"]
    said = json.dumps(resumed)
    assert "add hello.txt" in said  # the interrupted prompt, from the session
    assert "continue where you stopped" in said
    # Codex prints the session's running total after `resume`; the interrupted attempt
    # printed none (it was cut before its turn ended), so this run is charged the
    # session so far: the first attempt's answered request and its own two.
    assert one["usage"] is None
    assert (two["usage"]["input_tokens"], two["usage"]["output_tokens"]) == (
        200 + 400 + 500, 20 + 30 + 11)  # fmt: skip

    # When a follow-up continues the session,
    api.answer(Reply(text="tests added", input_tokens=4000, output_tokens=200))
    more = node.ended(node.followup(task_id, "now add tests"))

    # Then it ran in the same session and worktree, and counts only the tokens of its own
    # request, not the session's running total that Codex prints after `resume`
    assert more["status"] == "succeeded", more["status_reason"]
    (attempt,) = more["attempts"]
    assert attempt["worktree"]["path"] == one["worktree"]["path"]
    said = json.dumps(api.model_requests()[-1].body["input"])
    assert "now add tests" in said
    assert "add hello.txt" in said
    (completed,) = [e for e in json_events(attempt) if e["type"] == "turn.completed"]
    assert completed["usage"]["input_tokens"] == 1100 + 4000  # the session's total
    assert (attempt["usage"]["input_tokens"], attempt["usage"]["output_tokens"]) == (4000, 200)


def test_a_refused_run_holds_codex_until_a_later_run_goes_through(
    node: Node, api: OpenAIStandin
) -> None:
    # Given a provider that refuses every request with a 429 (Codex retries five times,
    # then gives up: `turn.failed`, exit 1)
    node.start()
    api.always = Refusal(retry_after=1)
    task_id = node.submit()

    # When the run ends on the refusal, the type backs off and says which line matched
    status = node.backing_off()
    (throttle,) = status["backoff"]
    assert throttle["agent"] == "codex"
    assert '"type":"turn.failed"' in throttle["reason"]
    assert "429" in throttle["reason"]
    held = node.show(task_id)
    assert held["status"] == "queued"
    assert held["attempts"][0]["outcome"] == "throttled"
    assert len(api.model_requests()) == 6  # the request and Codex's 5 retries

    # Then, once the hold passes (the default delay: 30 s, jittered), the task runs
    # again, succeeds, and the back-off ends.
    api.always = None
    api.answer(Reply(text="done"))
    task = node.ended(task_id, timeout=150)
    assert task["status"] == "succeeded", task["status_reason"]
    assert node.status()["backoff"] == []


def test_a_429_codex_retried_itself_does_not_back_off(node: Node, api: OpenAIStandin) -> None:
    # Given a provider that refuses once (Codex retries: "Reconnecting... 1/5 (… 429 …)"),
    # then fails the run for another reason (an HTTP 400)
    node.start()
    api.answer(Refusal(retry_after=1))
    api.always = Refusal(400, "Invalid 'input': bad request", None, "invalid_request_error")

    task = node.ended(node.submit())

    # Then the run failed as any run does: not requeued as throttled, codex not held
    assert task["status"] == "failed"
    (attempt,) = task["attempts"]
    assert attempt["outcome"] == "failed"
    log = log_of(attempt)
    assert "Reconnecting... 1/5" in log
    assert "429 Too Many Requests" in log
    assert node.status()["backoff"] == []


def test_a_codex_run_merges_into_the_checked_out_branch(
    node: Node, api: OpenAIStandin, repo: Path
) -> None:
    # Given a codex run that left its file uncommitted in its worktree
    node.start()
    api.answer(writes("hello.txt", "to be merged\n"), Reply(text="done"))
    task = node.ended(node.submit())
    assert task["status"] == "succeeded", task["status_reason"]

    # When the run is merged into main, which the user has checked out, clean
    node.merge(task["id"])

    # Then the file lands in main and in the checkout's files
    assert show(repo, "main", "hello.txt") == "to be merged"  # (git's output, stripped)
    assert (repo / "hello.txt").read_text() == "to be merged\n"
