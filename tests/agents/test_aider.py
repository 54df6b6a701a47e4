"""The real aider under a real node, as docs/coding-agents.md configures it.

Each test writes the docs' slotline.yaml as it is (`docs_agents_config()`), starts
`slotline serve`, submits to the `aider` agent type in a real git repository, and scripts
what the model answers through the OpenAI API stand-in (openai_standin.py, Chat
Completions through litellm): aider edits files from the text of the answer, in its
`whole` edit format (the file's name, then its whole content in a fenced block).

What differs from a user's machine is only its environment: the stand-in's URL in
AIDER_OPENAI_API_BASE, the key in OPENAI_API_KEY, the model in AIDER_MODEL, no network (the
price list aider and litellm would download is the one litellm ships:
LITELLM_LOCAL_MODEL_COST_MAP, and aider's cache of it), and the stand-in as the HTTP(S)
proxy, so that a request meant for any other host is seen (and refused).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gitrepos import run, show

from .conftest import AGENTS_DIR, Agent, Node, installed, log_of
from .openai_standin import OpenAIStandin, Refusal, Reply

API_KEY = "sk-openai-standin-key"
MODEL = "gpt-4o-mini"

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def agent() -> Agent:
    """aider, whose runs are passed what this machine needs beyond the docs' aider type:
    its proxy, and no price download."""
    return installed("aider", reads=("OPENAI_", "AIDER_", "HTTP", "ALL_PROXY"),
                     env_allow=("*_PROXY", "*_proxy", "LITELLM_LOCAL_MODEL_COST_MAP"))  # fmt: skip


def price_list() -> dict[str, Any]:
    """The model prices litellm ships with aider (aider reads them, or downloads them)."""
    name = "model_prices_and_context_window_backup.json"
    found = sorted((AGENTS_DIR / "aider").glob(f"lib/python3*/site-packages/litellm/{name}"))
    assert found, "litellm's price list is not in aider's venv"
    prices: dict[str, Any] = json.loads(found[0].read_text())
    return prices


@pytest.fixture
def agent_env(home: Path, api: OpenAIStandin) -> dict[str, str]:
    """aider's variables and its price cache, warm: the stand-in as the OpenAI API and as
    the proxy, the key and the model set, no price download."""
    (home / ".aider" / "caches").mkdir(parents=True)
    cache = home / ".aider" / "caches" / "model_prices_and_context_window.json"
    cache.write_text(json.dumps(price_list()))
    return {
        **api.proxy_env(),
        "OPENAI_API_KEY": API_KEY,
        "AIDER_OPENAI_API_BASE": api.base_url,
        "AIDER_MODEL": MODEL,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


@pytest.fixture
def repo_files() -> dict[str, str]:
    # aider keeps its chat history and caches in `.aider*` files at the top of the
    # repository: ignored, as the docs advise, they stay out of the run's diff.
    return {"README.md": "hello\n", ".gitignore": ".aider*\n"}


def whole_file(name: str, text: str, tokens: tuple[int, int] = (100, 10)) -> Reply:
    """A model answer in aider's `whole` edit format: `name` with all its new text."""
    answer = f"I will create {name}.\n\n{name}\n```\n{text}```\n"
    return Reply(text=answer, input_tokens=tokens[0], output_tokens=tokens[1])


def cost_line(attempt: dict[str, Any]) -> str:
    """aider's last `Tokens: … Cost: …` line, from the attempt's log."""
    lines = [x for x in log_of(attempt).splitlines() if "Cost: $" in x]
    assert lines, f"aider printed no cost in {attempt['log_path']}"
    return lines[-1]


def test_a_worktree_run_leaves_aiders_edit_in_its_worktree_and_diff(
    node: Node, api: OpenAIStandin, repo: Path
) -> None:
    # Given the docs' config, and a model that answers with hello.txt in whole
    node.start()
    api.answer(whole_file("hello.txt", "written by aider\n"))

    # When an aider task runs
    task = node.ended(node.submit())

    # Then it succeeded, and aider's edit is in its worktree, not in the user's checkout
    assert task["status"] == "succeeded", task["status_reason"]
    (attempt,) = task["attempts"]
    worktree = Path(attempt["worktree"]["path"])
    assert (worktree / "hello.txt").read_text() == "written by aider\n"
    assert not (repo / "hello.txt").exists()
    # uncommitted (`--no-auto-commits`): `diff` shows it, and nothing else
    diff = node.diff(task["id"])
    assert "+written by aider" in diff
    assert re.findall(r"^\+\+\+ b/(.*)$", diff, flags=re.M) == ["hello.txt"]
    # The key and the model reached the API; aider asked nothing of any other host.
    (request,) = api.model_requests()
    assert request.path == "/v1/chat/completions"
    assert request.bearer == API_KEY
    assert request.body["model"] == MODEL
    assert not request.body.get("stream")  # `--no-stream`: the answer's usage is exact
    assert api.outside() == [], [(r.method, r.path) for r in api.outside()]


def test_cost_and_tokens_are_what_aider_printed_and_the_api_counted(
    node: Node, api: OpenAIStandin
) -> None:
    # Given a provider that refuses the first request with a 429 (the OpenAI client
    # under aider retries it by itself, after its `retry-after`), then answers
    node.start()
    api.answer(Refusal(retry_after=1), whole_file("hello.txt", "hi\n", (812, 21)))

    task = node.ended(node.submit())

    # Then the run succeeded; its tokens are what the stand-in reported for the answer
    # (the refused request counts nothing), and its cost is what aider printed: those
    # tokens at the price it knows for the model
    assert task["status"] == "succeeded", task["status_reason"]
    assert [r.headers["x-stainless-retry-count"] for r in api.model_requests()] == ["0", "1"]
    (attempt,) = task["attempts"]
    line = cost_line(attempt)
    assert line.startswith("Tokens: 812 sent, 21 received. Cost: $"), line
    usage = attempt["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (812, 21)
    printed = re.search(r"\$([0-9.]+) session", line)
    assert printed is not None
    assert usage["cost_usd"] == float(printed.group(1))
    model = price_list()[MODEL]
    cost = 812 * model["input_cost_per_token"] + 21 * model["output_cost_per_token"]
    assert usage["cost_usd"] == pytest.approx(cost, rel=0.05)  # aider prints 2 digits
    assert node.status()["backoff"] == []


def test_an_aider_run_merges_into_the_checked_out_branch(
    node: Node, api: OpenAIStandin, repo: Path
) -> None:
    # Given an aider run whose edit is left uncommitted in its worktree
    node.start()
    api.answer(whole_file("hello.txt", "to be merged\n"))
    task = node.ended(node.submit())
    assert task["status"] == "succeeded", task["status_reason"]

    # When the run is merged into main, which the user has checked out, clean
    node.merge(task["id"])

    # Then the file lands in main and in the checkout's files, and nothing of aider's
    # own files with it
    assert show(repo, "main", "hello.txt") == "to be merged"  # (git's output, stripped)
    assert (repo / "hello.txt").read_text() == "to be merged\n"
    landed = run(repo, "ls-tree", "--name-only", "main").split()
    assert sorted(landed) == [".gitignore", "README.md", "hello.txt"]
