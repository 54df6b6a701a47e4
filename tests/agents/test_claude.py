"""The real Claude Code CLI under a real node, as docs/coding-agents.md configures it.

Each test writes the docs' slotline.yaml as it is (`docs_agents_config()`), starts
`slotline serve`, submits to the `claude` agent type in a real git repository, and scripts
what the model answers through the Anthropic API stand-in (anthropic_standin.py): a Write
of a file, a final text, a 429, a slow answer. What the user sees (`show`, `diff`,
`status`, `merge`) is checked against what Claude printed and what the stand-in counted.

What differs from a user's machine is only its environment: the key in
ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL at the stand-in, QUIET_ENV (no traffic but the
API), and a HOME of the test's own without ~/.claude, where Claude Code keeps its
sessions and settings. The docs' `env_required` and `env_allow` pass them to the runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitrepos import show
from waiting import until

from .anthropic_standin import MODEL, AnthropicStandin
from .conftest import QUIET_ENV, RUN_TIMEOUT, Agent, Node, docs_agents_config, installed, log_of

API_KEY = "sk-ant-standin-key"

# What Claude Code 2.1.332 charges for its default model, in USD per token (input,
# output): read from its own `modelUsage.costUSD` for known token counts, since it
# prices a run itself from the counts the API reports.
PRICE = {MODEL: (4e-6, 20e-6)}

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def agent() -> Agent:
    """Claude Code, whose runs the docs' claude type passes all the variables it reads."""
    return installed("claude", reads=("ANTHROPIC_",))


@pytest.fixture
def standin() -> Iterator[AnthropicStandin]:
    """The Anthropic Messages API stand-in of one test (stopped at its end)."""
    with AnthropicStandin() as api:
        yield api


@pytest.fixture
def agent_env(standin: AnthropicStandin) -> dict[str, str]:
    """Claude Code's variables: the key set, the API at the stand-in, no other traffic."""
    return {**QUIET_ENV, "ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": standin.url}


def result_line(attempt: dict[str, Any]) -> dict[str, Any]:
    """Claude's own `result` object, the last line of the attempt's log."""
    lines = log_of(attempt).splitlines()
    results = [json.loads(x) for x in lines if x.startswith('{"') and '"type":"result"' in x]
    assert results, f"no result line in {attempt['log_path']}"
    result: dict[str, Any] = results[-1]
    return result


def cost_of(*turns: tuple[int, int]) -> float:
    """What `(input, output)` tokens of the default model cost."""
    price_in, price_out = PRICE[MODEL]
    return sum(i * price_in + o * price_out for i, o in turns)


def test_a_worktree_run_leaves_claudes_file_on_its_branch_and_in_diff(
    node: Node, standin: AnthropicStandin, repo: Path
) -> None:
    # Given the docs' config, and a model that writes hello.txt, then says it is done
    node.start()
    standin.write_file("hello.txt", "written by claude\n")
    standin.say("I added hello.txt.")

    # When a claude task runs
    task = node.ended(node.submit())

    # Then it succeeded, the file is in its worktree (not in the user's checkout)
    assert task["status"] == "succeeded", task["status_reason"]
    (attempt,) = task["attempts"]
    worktree = Path(attempt["worktree"]["path"])
    assert (worktree / "hello.txt").read_text() == "written by claude\n"
    assert not (repo / "hello.txt").exists()
    # and `diff` shows it
    diff = node.diff(task["id"])
    assert "+++ b/hello.txt" in diff
    assert "+written by claude" in diff
    # The key reached the API, Claude ran the Write and reported its result, and the
    # CLI asked nothing else of the API than messages.
    first, second = standin.messages()
    assert first.headers["x-api-key"] == API_KEY
    assert "add hello.txt" in first.text()
    (tool_result,) = second.tool_results()
    assert not tool_result.get("is_error"), tool_result
    assert standin.others() == []
    assert standin.pending() == 0
    assert result_line(attempt)["permission_denials"] == []


def test_cost_and_tokens_are_what_claude_printed_and_the_api_counted(
    node: Node, standin: AnthropicStandin, repo: Path
) -> None:
    node.start()
    standin.write_file("hello.txt", "hi\n", input_tokens=1200, output_tokens=80)
    standin.say("done", input_tokens=1500, output_tokens=30)

    task = node.ended(node.submit())

    assert task["status"] == "succeeded", task["status_reason"]
    (attempt,) = task["attempts"]
    result = result_line(attempt)
    usage = attempt["usage"]
    # Tokens: the sum of what the stand-in reported for each answer
    assert (usage["input_tokens"], usage["output_tokens"]) == (1200 + 1500, 80 + 30)
    # Cost: what Claude computed from those counts, and what they cost at its price
    assert usage["cost_usd"] == result["total_cost_usd"]
    assert usage["cost_usd"] == pytest.approx(cost_of((2700, 110)))
    assert attempt["session_id"] == result["session_id"]


def test_an_interrupted_run_resumes_its_session_and_a_followup_continues_it_each_costed_alone(
    node: Node, standin: AnthropicStandin
) -> None:
    # Given a run whose model answer is slow,
    node.start()
    slow = standin.hold()
    task_id = node.submit("add hello.txt")
    until(standin.holding.is_set, timeout=RUN_TIMEOUT, what="the CLI waiting for its answer")
    # When it is terminated as resumable, and restarted,
    node.terminate(task_id, "--resumable")
    first = node.ended(task_id)
    slow.set()  # its CLI is gone: the answer goes nowhere
    standin.write_file("hello.txt", "resumed\n", input_tokens=2000, output_tokens=100)
    standin.say("done after resuming", input_tokens=3000, output_tokens=50)
    node.restart(task_id)
    task = node.ended(task_id, attempts=2)

    # Then the second attempt continued the first one's session, in the same worktree
    assert task["status"] == "succeeded", task["status_reason"]
    one, two = task["attempts"]
    assert one["resumable"], first
    assert two["resumed_from"] == {"task_id": task_id, "attempt": 1}
    assert two["worktree"]["path"] == one["worktree"]["path"]
    resumed = standin.messages()[-2]
    assert "add hello.txt" in resumed.text()  # the interrupted prompt, from the session
    assert "continue where you stopped" in resumed.text()
    assert (Path(two["worktree"]["path"]) / "hello.txt").read_text() == "resumed\n"
    # and is costed for what it spent
    assert (two["usage"]["input_tokens"], two["usage"]["output_tokens"]) == (5000, 150)
    assert two["usage"]["cost_usd"] == pytest.approx(cost_of((5000, 150)))

    # When a follow-up continues the session,
    standin.say("tests added", input_tokens=4000, output_tokens=200)
    more = node.ended(node.followup(task_id, "now add tests"))

    # Then it ran in the same session and worktree, and costs only what it spent, not
    # the session's running total that Claude prints after `--resume`.
    assert more["status"] == "succeeded", more["status_reason"]
    (attempt,) = more["attempts"]
    assert attempt["worktree"]["path"] == one["worktree"]["path"]
    asked = standin.messages()[-1]
    assert "now add tests" in asked.text()
    assert "add hello.txt" in asked.text()
    result = result_line(attempt)
    assert result["total_cost_usd"] == pytest.approx(cost_of((5000, 150), (4000, 200)))
    assert (attempt["usage"]["input_tokens"], attempt["usage"]["output_tokens"]) == (4000, 200)
    assert attempt["usage"]["cost_usd"] == pytest.approx(cost_of((4000, 200)))


def test_a_refused_run_holds_claude_until_a_later_run_goes_through(
    node: Node, standin: AnthropicStandin
) -> None:
    # Given a provider that refuses with a 429 and tells the client not to retry it
    node.start()
    standin.refuse(retry_after=30, retry=False)
    standin.say("done")
    task_id = node.submit()

    # When the run ends on the refusal, the type backs off and says which line matched
    status = node.backing_off()
    (throttle,) = status["backoff"]
    assert throttle["agent"] == "claude"
    assert '"api_error_status":429' in throttle["reason"]
    held = node.show(task_id)
    assert held["status"] == "queued"
    assert held["attempts"][0]["outcome"] == "throttled"
    assert '"api_error_status":429' in held["status_reason"]

    # Then, once the hold passes (the docs' delay: 60 s, jittered), the task runs again,
    # succeeds, and the back-off ends.
    task = node.ended(task_id, timeout=150)
    assert task["status"] == "succeeded", task["status_reason"]
    assert node.status()["backoff"] == []
    kinds = [e["kind"] for e in node.events()]
    assert "backoff_recovered" in kinds


def test_a_429_claude_retried_itself_does_not_back_off(
    node: Node, standin: AnthropicStandin
) -> None:
    # Given a provider that refuses once (Claude retries, prints an `api_retry` line),
    # then fails the run for another reason (an HTTP 400)
    node.start()
    standin.refuse(retry_after=1)
    standin.fail(400, "invalid_request_error", always=True)

    task = node.ended(node.submit())

    # Then the run failed as any run does: not requeued as throttled, claude not held
    assert task["status"] == "failed"
    (attempt,) = task["attempts"]
    assert attempt["outcome"] == "failed"
    log = log_of(attempt)
    assert '"subtype":"api_retry"' in log
    assert '"error_status":429' in log
    assert node.status()["backoff"] == []


def test_a_run_refused_its_edits_is_flagged(node: Node, standin: AnthropicStandin) -> None:
    # Given the docs' claude type without its permission mode (`claude -p` alone)
    config = docs_agents_config()
    command = config["agents"]["claude"]["command"]
    at = command.index("--permission-mode")
    config["agents"]["claude"]["command"] = command[:at] + command[at + 2 :]
    node.start(config)
    standin.write_file("hello.txt", "never written\n")
    standin.say("I could not write the file.")

    # When the model asks to write a file
    task = node.ended(node.submit())

    # Then Claude refused the Write, yet exited 0
    (attempt,) = task["attempts"]
    assert attempt["exit_code"] == 0
    (denial,) = result_line(attempt)["permission_denials"]
    assert denial["tool_name"] == "Write"
    assert not (Path(attempt["worktree"]["path"]) / "hello.txt").exists()
    # and slotline flags the run: on its attempt, in its reason, by an event
    assert attempt["denied_tools"] == ["Write"]
    assert "Write" in task["status_reason"]
    events = node.events()
    assert [e["task_id"] for e in events if e["kind"] == "denied"] == [task["id"]]


def test_a_run_merges_into_the_checked_out_branch(
    node: Node, standin: AnthropicStandin, repo: Path
) -> None:
    node.start()
    standin.write_file("hello.txt", "to be merged\n")
    standin.say("done")
    task = node.ended(node.submit())
    assert task["status"] == "succeeded", task["status_reason"]

    # When the run is merged into main, which the user has checked out, clean
    node.merge(task["id"])

    # Then the file lands in main and in the checkout's files
    assert show(repo, "main", "hello.txt") == "to be merged"  # (git's output, stripped)
    assert (repo / "hello.txt").read_text() == "to be merged\n"
