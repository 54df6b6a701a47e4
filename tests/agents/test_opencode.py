"""The real opencode under a real node, as docs/coding-agents.md configures it.

Each test writes the docs' slotline.yaml as it is (`docs_agents_config()`), starts
`slotline serve`, submits to the `opencode` agent type in a real git repository, and
scripts what the model answers through the OpenAI API stand-in (openai_standin.py, the
Responses API): a `write` tool call, a final message, a 429, a slow answer. opencode
also asks the model for a session title, beside the turn: the stand-in answers those
off the script.

What differs from a user's machine is only its environment: an OPENCODE_CONFIG file
that points opencode's `openai` provider at the stand-in, the key in OPENAI_API_KEY,
opencode's switches that stop its model-list download and its update check, and the
stand-in as the HTTP(S) proxy, so that a request meant for any other host is seen.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from gitrepos import show
from waiting import until

from .conftest import RUN_TIMEOUT, Agent, Node, installed, json_events, log_of
from .openai_standin import Call, OpenAIStandin, Refusal, Reply

API_KEY = "sk-openai-standin-key"
MODEL = "gpt-4o-mini"
TITLE = "Generate a title for this conversation"

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def agent() -> Agent:
    """opencode, whose runs are passed this machine's proxy variables beside what the
    docs' opencode type passes."""
    return installed("opencode", reads=("OPENAI_", "OPENCODE", "HTTP", "ALL_PROXY"),
                     env_allow=("*_PROXY", "*_proxy"))  # fmt: skip


@pytest.fixture
def api(api: OpenAIStandin) -> OpenAIStandin:
    """The OpenAI API stand-in, which answers opencode's title requests off the script."""
    api.aside(TITLE, Reply(text="A title", input_tokens=5, output_tokens=2))
    return api


@pytest.fixture
def agent_env(tmp_path: Path, api: OpenAIStandin) -> dict[str, str]:
    """opencode's variables: its config file, for the stand-in, the key set, its
    downloads and update check off, the stand-in as the proxy."""
    config = tmp_path / "opencode.json"
    config.write_text(json.dumps({
        "model": f"openai/{MODEL}",
        "autoupdate": False,
        "share": "disabled",
        "provider": {"openai": {"options": {"baseURL": api.base_url}}},
    }))  # fmt: skip
    return {
        **api.proxy_env(),
        "OPENAI_API_KEY": API_KEY,
        "OPENCODE_CONFIG": str(config),
        "OPENCODE_DISABLE_MODELS_FETCH": "true",
        "OPENCODE_DISABLE_AUTOUPDATE": "true",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true",
    }


def writes(name: str, text: str, tokens: tuple[int, int] = (100, 10)) -> Reply:
    """A model answer that has opencode's `write` tool write `name`."""
    return Reply(calls=[Call("write", {"filePath": name, "content": text})],
                 input_tokens=tokens[0], output_tokens=tokens[1])  # fmt: skip


def turns(api: OpenAIStandin) -> list[str]:
    """What opencode sent for each model request of its turns (title requests aside)."""
    bodies = [json.dumps(r.body) for r in api.model_requests()]
    return [body for body in bodies if TITLE not in body]


def test_a_worktree_run_writes_opencodes_file_and_shows_in_diff(
    node: Node, api: OpenAIStandin, repo: Path
) -> None:
    # Given the docs' config, and a model that has opencode write hello.txt, then done
    node.start()
    api.answer(writes("hello.txt", "written by opencode\n", (1200, 80)),
               Reply(text="I added hello.txt.", input_tokens=1500, output_tokens=30))  # fmt: skip

    # When an opencode task runs
    task = node.ended(node.submit())

    # Then it succeeded, and the file is in its worktree, not in the user's checkout
    assert task["status"] == "succeeded", task["status_reason"]
    (attempt,) = task["attempts"]
    worktree = Path(attempt["worktree"]["path"])
    assert (worktree / "hello.txt").read_text() == "written by opencode\n"
    assert not (repo / "hello.txt").exists()
    diff = node.diff(task["id"])
    assert "+++ b/hello.txt" in diff
    assert "+written by opencode" in diff
    # opencode printed its session id (recorded), and each step's own tokens: one
    # `step_finish` per step, which no `usage` rule of the docs sums
    events = json_events(attempt)
    assert attempt["session_id"] == events[0]["sessionID"]
    steps = [e["part"]["tokens"] for e in events if e["type"] == "step_finish"]
    assert [(s["input"], s["output"]) for s in steps] == [(1200, 80), (1500, 30)]
    assert attempt["usage"] is None
    # The key reached the API; opencode asked no other host but npm's registry (which it
    # tries at start; refused, it goes on)
    requests = api.model_requests()
    assert {r.bearer for r in requests} == {API_KEY}
    assert {r.path for r in requests} == {"/v1/responses"}
    assert {r.path for r in api.outside()} <= {"registry.npmjs.org:443"}


def test_an_interrupted_run_resumes_its_session_and_a_followup_continues_it(
    node: Node, api: OpenAIStandin
) -> None:
    # Given a run that wrote a file, and whose next model answer is slow,
    node.start()
    api.answer(writes("hello.txt", "first\n"), Reply(text="never sent", hold=threading.Event()))
    task_id = node.submit("add hello.txt")
    until(api.held.is_set, timeout=RUN_TIMEOUT, what="opencode waiting for its answer")
    # When it is terminated as resumable, and restarted,
    node.terminate(task_id, "--resumable")
    node.ended(task_id)
    api.release()  # its CLI is gone: the answer goes nowhere
    api.answer(writes("more.txt", "resumed\n"), Reply(text="done after resuming"))
    node.restart(task_id)
    task = node.ended(task_id, attempts=2)

    # Then the second attempt continued the first one's session (`--session`), in the
    # same worktree, where both files now are
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
    resumed = turns(api)[-2]
    assert "add hello.txt" in resumed  # the interrupted prompt, from the session
    assert "continue where you stopped" in resumed

    # When a follow-up continues the session,
    api.answer(Reply(text="tests added"))
    more = node.ended(node.followup(task_id, "now add tests"))

    # Then it ran in the same session and worktree
    assert more["status"] == "succeeded", more["status_reason"]
    (attempt,) = more["attempts"]
    assert attempt["session_id"] == one["session_id"]
    assert attempt["worktree"]["path"] == one["worktree"]["path"]
    asked = turns(api)[-1]
    assert "now add tests" in asked
    assert "add hello.txt" in asked


def test_a_refused_run_holds_opencode_until_the_reset_it_names(
    node: Node, api: OpenAIStandin
) -> None:
    # Given a provider that refuses every request with a 429, `retry-after: 3` (the SDK
    # under opencode retries it silently, then opencode prints one error line, exit 1)
    node.start()
    api.always = Refusal(retry_after=3)
    task_id = node.submit()

    # When the run ends on the refusal, the type backs off until the reset it read
    status = node.backing_off()
    (throttle,) = status["backoff"]
    assert throttle["agent"] == "opencode"
    assert '"statusCode":429' in throttle["reason"]
    assert throttle["reset_at"] is not None
    held = node.show(task_id)
    assert held["attempts"][0]["outcome"] == "throttled"

    # Then, once it passed, one run probes, succeeds, and the back-off ends
    api.always = Reply(text="done")
    task = node.ended(task_id)
    assert task["status"] == "succeeded", task["status_reason"]
    assert node.status()["backoff"] == []


def test_a_429_opencode_retried_itself_does_not_back_off(node: Node, api: OpenAIStandin) -> None:
    # Given a provider that refuses once (retried silently), then fails the run for
    # another reason (an HTTP 400)
    node.start()
    api.answer(Refusal(retry_after=1))
    api.always = Refusal(400, "Invalid 'input': bad request", None, "invalid_request_error")

    task = node.ended(node.submit())

    # Then the run failed as any run does: not requeued as throttled, opencode not held
    assert task["status"] == "failed"
    (attempt,) = task["attempts"]
    assert attempt["outcome"] == "failed"
    assert '"statusCode":400' in log_of(attempt)
    assert node.status()["backoff"] == []


def test_an_opencode_run_merges_into_the_checked_out_branch(
    node: Node, api: OpenAIStandin, repo: Path
) -> None:
    node.start()
    api.answer(writes("hello.txt", "to be merged\n"), Reply(text="done"))
    task = node.ended(node.submit())
    assert task["status"] == "succeeded", task["status_reason"]

    # When the run is merged into main, which the user has checked out, clean
    node.merge(task["id"])

    # Then the file lands in main and in the checkout's files
    assert show(repo, "main", "hello.txt") == "to be merged"  # (git's output, stripped)
    assert (repo / "hello.txt").read_text() == "to be merged\n"
