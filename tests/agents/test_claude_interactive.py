"""Interactive Claude Code runs through slotline, as docs/coding-agents.md configures them
("Interactive runs"): the real CLI, without `-p`, in slotline's own tmux terminals,
against the Anthropic API stand-in.

What differs from a user's machine is the environment of every agent test (a key, the
API at the stand-in, no other traffic, a HOME of the test's own) and, in that HOME, what
a user who has used Claude Code before has in ~/.claude.json (`seed_claude_home`): else
its first-run screens (a theme, trusting the folder, approving the key) wait for a
person. Trusting the repository covers the git worktrees slotline runs each task in.

The scenario is issue 30's: three interactive runs at a limit of two; one attached to
from the CLI (a real terminal: a pane of the test's own tmux server) and ended there,
one answered in the dashboard's terminal (Debian's chromium through Playwright), the
third heard of when it needs input (a command hook, as a desktop notification would
be) and answered through `slotline send`, and none lost when the node is killed with
SIGKILL and started again.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import sync_playwright

from browser.conftest import require_chromium, row_action
from slotline.runner.tmux import Terminal, socket_path
from waiting import until

from .anthropic_standin import AnthropicStandin
from .conftest import (
    ENDED,
    QUIET_ENV,
    RUN_TIMEOUT,
    Agent,
    Run,
    docs_agents_config,
    docs_yaml_blocks,
    installed,
    ok,
)
from .interactive import seed_claude_home

# Longer than the 20 characters Claude Code remembers of a key it was told to use.
API_KEY = "sk-ant-api03-standin-0123456789abcdefghijklmnopqrstuvwxyz"
QUESTION = "Done. Shall I go on?"

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def agent() -> Agent:
    return installed("claude", reads=("ANTHROPIC_",))


@pytest.fixture
def standin() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as api:
        yield api


@pytest.fixture
def agent_env(standin: AnthropicStandin) -> dict[str, str]:
    return {**QUIET_ENV, "ANTHROPIC_API_KEY": API_KEY, "ANTHROPIC_BASE_URL": standin.url}


def interactive_types() -> dict[str, Any]:
    """The agent types of the docs' "Interactive runs" block, as the docs give them."""
    for block in docs_yaml_blocks("coding-agents.md"):
        loaded = yaml.safe_load(block)
        if isinstance(loaded, dict) and "claude-interactive" in loaded.get("agents", {}):
            agents: dict[str, Any] = loaded["agents"]
            return agents
    raise AssertionError("docs/coding-agents.md has no claude-interactive type")


class Node:
    """`slotline serve` in the test's folder, with its dashboard, which the test may kill
    with SIGKILL."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder = env, folder
        self.process: subprocess.Popen[str] | None = None
        self.dashboard = ""

    def start(self) -> None:
        with (self.folder / "serve.log").open("a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "slotline", "--json", "serve", "--node-id", "box",
                 "--port", "0"],
                stdout=subprocess.PIPE, stderr=log, text=True, env=self.env, cwd=self.folder,
            )  # fmt: skip
        assert self.process.stdout is not None
        self.process.stdout.readline()  # the node's line
        self.dashboard = json.loads(self.process.stdout.readline())["dashboard"]

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.communicate(timeout=60)


@pytest.fixture
def box(base_env: dict[str, str], tmp_path: Path, home: Path, repo: Path) -> Iterator[Node]:
    """The docs' configuration with the interactive types, at a limit of two, a command
    hook that notes which runs need input, and a node that serves it; every tmux server
    is stopped at the end."""
    seed_claude_home(home, repo, API_KEY)
    config = docs_agents_config()
    config["agents"].update(interactive_types())
    config["max_concurrent"] = 2
    heard = tmp_path / "heard"
    config["on_event"] = {"task.needs_input": ["sh", "-c", 'echo "$1" >> "$0"', str(heard), "{id}"]}
    (tmp_path / "slotline.yaml").write_text(yaml.safe_dump(config))
    node = Node(base_env, tmp_path)
    yield node
    node.kill(signal.SIGTERM)
    for socket in (socket_path(tmp_path / "logs"), str(tmp_path / "user.sock")):
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, check=False)


def show(cli: Run, task_id: str) -> dict[str, Any]:
    found: dict[str, Any] = ok(cli("--json", "show", task_id))
    return found


def screen_of(cli: Run, task_id: str) -> str:
    task = show(cli, task_id)
    terminal = Terminal.of(task["attempts"][-1]["log_path"]) if task["attempts"] else None
    try:
        return terminal.screen() if terminal is not None else ""
    except Exception:
        return ""


def reached(standin: AnthropicStandin, text: str) -> bool:
    """Whether a request to the model API carries `text` (what was typed reached Claude)."""
    return any(text in m.text() for m in standin.messages())


def waiting_for_a_message(screen: str) -> bool:
    """Claude's screen while it waits for the user's next message."""
    return QUESTION in screen and "esc to interrupt" not in screen


def test_three_interactive_claude_runs_at_a_limit_of_two(
    cli: Run, box: Node, standin: AnthropicStandin, repo: Path, tmp_path: Path,
    base_env: dict[str, str],
) -> None:  # fmt: skip
    # Given a model that answers every message with a question,
    for _ in range(12):
        standin.say(QUESTION)
    box.start()
    # when three interactive runs are queued at a limit of two,
    ids = [
        ok(cli("--json", "submit", "--agent", "claude-interactive", "--prompt", prompt,
               "--workspace", str(repo)))["id"]
        for prompt in ("fix the flaky test", "add retries", "update the docs")
    ]  # fmt: skip
    first, second, third = ids
    until(lambda: show(cli, first)["status"] == "running", RUN_TIMEOUT, "the first run")
    until(lambda: show(cli, second)["status"] == "running", RUN_TIMEOUT, "the second run")
    # then two run, each in its own terminal, and the third waits for a slot.
    assert show(cli, third)["status"] == "queued"
    for task_id in (first, second):
        until(lambda t=task_id: waiting_for_a_message(screen_of(cli, t)), RUN_TIMEOUT, "Claude")

    # A user attaches to the first from the CLI (in a terminal of their own) and ends it;
    user = ["tmux", "-S", str(tmp_path / "user.sock"), "-f", os.devnull]
    attach = shlex.join([sys.executable, "-m", "slotline", "attach", first])
    shell = f'{attach}; echo "attach exited $?"; exec sleep 600'
    env = {k: v for k, v in base_env.items() if not k.startswith("TMUX")}
    subprocess.run([*user, "new-session", "-d", "-x", "120", "-y", "40", shell],
                   env=env, cwd=tmp_path, check=True)  # fmt: skip

    def user_screen() -> str:
        capture = [*user, "capture-pane", "-p"]
        return subprocess.run(capture, capture_output=True, text=True, check=False).stdout

    until(lambda: QUESTION in user_screen(), RUN_TIMEOUT, "Claude in the user's terminal")
    subprocess.run([*user, "send-keys", "-l", "/exit"], check=True)
    subprocess.run([*user, "send-keys", "Enter"], check=True)
    ended = until(lambda: (t := show(cli, first))["status"] in ENDED and t, RUN_TIMEOUT)
    assert ended["status"] == "succeeded", ended
    assert ended["attempts"][-1]["exit_code"] == 0
    until(lambda: "attach exited 0" in user_screen(), RUN_TIMEOUT, "attach's end")
    assert f"task {first[:8]} succeeded" in user_screen()

    # Its slot goes to the third. The user answers the second in the dashboard: its task
    # page's terminal shows Claude's screen, and what is typed there reaches Claude.
    until(lambda: show(cli, third)["status"] == "running", RUN_TIMEOUT, "the third run")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=require_chromium(), args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        page.set_default_timeout(RUN_TIMEOUT * 1000)
        page.goto(box.dashboard)
        page.wait_for_selector("#connection:has-text('live')")
        row_action(page, second, "view", "#running")
        terminal = page.locator("#task-terminal")
        terminal.locator(f".xterm-rows:has-text('{QUESTION}')").wait_for()
        terminal.click()
        page.keyboard.type("yes, go on")
        page.keyboard.press("Enter")
        # (the third run's own first requests reach the API meanwhile: wait for the answer)
        until(lambda: reached(standin, "yes, go on"), RUN_TIMEOUT, "the answer at the API")
        browser.close()

    # The third, once it waits quiet for idle_after, needs input: the hook hears it, and
    # its question is answered through `send`.
    heard = tmp_path / "heard"
    until(lambda: heard.exists() and third in heard.read_text(), 120, "the needs-input hook")
    assert show(cli, third)["needs_input_at"] is not None
    assert "NEEDS INPUT" in cli("status").out
    sent = cli("send", third, "yes, and add a test")
    assert sent.code == 0, sent.err
    until(lambda: reached(standin, "yes, and add a test"), RUN_TIMEOUT, "the answer at the API")
    until(lambda: show(cli, third)["needs_input_at"] is None, RUN_TIMEOUT, "the mark cleared")

    # The node is killed with SIGKILL: both runs go on, and a new node re-adopts them.
    pids = {t: show(cli, t)["attempts"][-1]["pid"] for t in (second, third)}
    box.kill()
    box.start()
    for task_id in (second, third):
        until(
            lambda t=task_id: any(
                e["kind"] == "reconciled" and e["task_id"] == t and e["data"]["action"] == "adopted"
                for e in ok(cli("--json", "events", "-n", "1000"))
            ),
            RUN_TIMEOUT, "re-adoption",
        )  # fmt: skip
        assert show(cli, task_id)["attempts"][-1]["pid"] == pids[task_id]
        assert cli("send", task_id, "/exit").code == 0
    for task_id in (second, third):
        ended = until(lambda t=task_id: (s := show(cli, t))["status"] in ENDED and s, RUN_TIMEOUT)
        assert ended["status"] == "succeeded", ended
        assert ended["attempts"][-1]["exit_code"] == 0
        assert len(ended["attempts"]) == 1  # the same run, never started again
    assert standin.others() == []
