"""The real aider, interactive, in a tmux terminal of the test's own (not through
slotline yet): what the docs' aider-interactive type is made of.

aider cannot take a first message and stay interactive (`--message` and
`--message-file` answer one and exit), so the type starts it without one and types the
prompt as its first line. Here the line is typed at once, before aider has drawn its
prompt: the terminal keeps it until aider reads it. aider then asks on its terminal
before it creates a file (no `--yes-always`); the test answers as `slotline send` would,
checks the next message goes on with the first in the chat's history, and ends aider
with `/exit`, exit status 0.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from . import interactive
from .conftest import Agent, installed
from .interactive import Pane, TmuxServer
from .openai_standin import OpenAIStandin
from .test_aider import API_KEY, MODEL, price_list, whole_file

# The docs' aider-interactive command.
COMMAND = ["aider", "--no-auto-commits", "--no-stream", "--no-check-update",
           "--no-show-release-notes", "--no-analytics"]  # fmt: skip

tmux_server = interactive.tmux_server

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def agent() -> Agent:
    """aider (skipped, or failed in CI, without it)."""
    return installed("aider", reads=("OPENAI_", "AIDER_", "HTTP", "ALL_PROXY"))


@pytest.fixture
def agent_env(home: Path, api: OpenAIStandin) -> dict[str, str]:
    """aider's variables as test_aider.py sets them: the stand-in as the API and the
    proxy, the key and the model, its price cache warm."""
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
    # `.aider*` ignored, as the docs advise: else aider's first question is about that.
    return {"README.md": "hello\n", ".gitignore": ".aider*\n"}


@pytest.fixture
def aider(tmux_server: TmuxServer, base_env: dict[str, str], repo: Path) -> Callable[[], Pane]:
    """Starts the real aider in `repo`, in a session of the test's tmux server, with the
    test's environment but e2e's PYTHONWARNINGS=error (which a node does not pass to its
    runs, and under which aider, a Python program, fails at its imports)."""
    env = {k: v for k, v in base_env.items() if k != "PYTHONWARNINGS"}
    return lambda: tmux_server.start("aider", COMMAND, cwd=repo, env=env)


def test_aider_reads_its_prompt_typed_as_its_first_line_asks_and_keeps_the_chat(
    aider: Callable[[], Pane], api: OpenAIStandin, repo: Path
) -> None:
    # Given a model that creates hello.txt, then bye.txt
    api.answer(whole_file("hello.txt", "written by aider\n"), whole_file("bye.txt", "bye\n"))

    # When aider starts and the prompt is typed as its first line, at once
    pane = aider()
    pane.type("create hello.txt")

    # Then aider sends it, and asks before it creates the file
    pane.wait_for("Create new file? (Y)es/(N)o [Yes]:")
    assert not (repo / "hello.txt").exists()
    # When the question is answered as `slotline send TASK y` would
    pane.type("y")
    # Then the file is written, and aider waits at its prompt
    pane.wait_for("Applied edit to hello.txt")
    assert (repo / "hello.txt").read_text() == "written by aider\n"

    # When the next message is typed, it goes to the model with the first in the chat
    pane.type("now create bye.txt")
    pane.wait_until(lambda screen: screen.count("Create new file?") == 2, "the second question")
    pane.type("y")
    pane.wait_for("Applied edit to bye.txt")
    _, second = api.model_requests()
    said = [m["content"] for m in second.body["messages"] if m["role"] == "user"]
    assert "create hello.txt" in said
    assert said[-1] == "now create bye.txt"
    assert api.outside() == [], [(r.method, r.path) for r in api.outside()]

    # When the user types /exit, aider ends, with exit status 0
    pane.type("/exit")
    assert pane.exited() == 0
