"""The real Claude Code, interactive (no `-p`), in a tmux terminal of the test's own.

Not through slotline yet: what an interactive run of the docs' claude-interactive type is
made of, checked against the real CLI. Claude Code starts with the prompt as its first
message, in a HOME seeded as a returning user's (`seed_claude_home`: no first-run
screens), against the Anthropic API stand-in, which asks for a Write. Under
`--permission-mode default` Claude asks on its terminal before writing; the test answers
as `slotline send` would (the choice's number, then Enter); Claude then waits, idle, for
the next message, and `/exit` ends it with exit status 0.

What Claude Code 2.1.332 shows, and what answers it:
- the question, under the Write it asks about: "Do you want to create hello.txt?", then
  "1. Yes" (highlighted), "2. Yes, and switch to accept edits (…) for this session (shift+tab)",
  "3. No", and "Esc to cancel · Tab to amend". A digit chooses at once (the Enter typed
  after it lands in the empty message box and does nothing); Enter alone takes the
  highlighted choice (Yes); "3" refuses: "Rejected write to hello.txt", the turn ends,
  and Claude waits for a message;
- while it works: a spinner line ("✻ Scampering… (16s)") and "esc to interrupt" at the
  bottom, repainted about ten times a second (also while the API is slow to answer);
- waiting for a message: the empty message box between two rules, the last answer
  above it, under it the mode ("⏸ manual mode on · ? for shortcuts"), and no "esc to
  interrupt". It then stops printing: its last repaints come 8 to 17 s after the answer
  (a hint wiped; on a tmux server without `focus-events on`, a notice saying so, shown
  and wiped), then nothing as long as nobody types. A permission question prints
  nothing while it waits either.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from . import interactive
from .anthropic_standin import AnthropicStandin
from .conftest import QUIET_ENV, Agent, installed
from .interactive import Pane, TmuxServer, seed_claude_home

# Longer than the 20 characters Claude Code remembers of an approved key.
API_KEY = "sk-ant-api03-standin-0123456789abcdefghijklmnopqrstuvwxyz"

tmux_server = interactive.tmux_server

pytestmark = pytest.mark.slow

Start = Callable[[str], Pane]


@pytest.fixture(autouse=True)
def agent() -> Agent:
    """Claude Code (skipped, or failed in CI, without it)."""
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


@pytest.fixture
def claude(tmux_server: TmuxServer, base_env: dict[str, str], home: Path, repo: Path) -> Start:
    """Starts the real Claude Code in `repo`, interactive, asking before each edit, in a
    session of the test's tmux server, with the given prompt as its first message; returns
    its pane."""
    seed_claude_home(home, repo, API_KEY)

    def start(prompt: str) -> Pane:
        argv = ["claude", "--permission-mode", "default", "--", prompt]
        return tmux_server.start("claude", argv, cwd=repo, env=base_env)

    return start


def waiting_for_a_message(screen: str) -> bool:
    """Whether Claude's screen is a session's waiting for the user's next message."""
    return "? for shortcuts" in screen and "esc to interrupt" not in screen


def test_claude_asks_before_writing_a_typed_choice_answers_then_it_waits_and_exits_0(
    claude: Start, standin: AnthropicStandin, repo: Path
) -> None:
    # Given a model that writes hello.txt, then says it is done
    standin.write_file("hello.txt", "written by claude\n")
    standin.say("I added hello.txt.")

    # When Claude Code runs interactively with the prompt as its first message
    pane = claude("add hello.txt")

    # Then it asks before writing, on its terminal, and has not written yet
    screen = pane.wait_for("Do you want to create hello.txt?")
    assert "❯ 1. Yes" in screen
    assert "3. No" in screen
    assert not (repo / "hello.txt").exists()

    # When the question is answered as `slotline send TASK 1` would
    pane.type("1")

    # Then the file is written and Claude's answer shows
    pane.wait_for("I added hello.txt.")
    assert (repo / "hello.txt").read_text() == "written by claude\n"
    # and it waits for the next message
    screen = pane.wait_until(waiting_for_a_message, "Claude waiting for a message")
    assert "Wrote 1 line to hello.txt" in screen
    # and, waiting, it stops printing (what the needs-input mark waits for): its last
    # repaints (the logo's, a hint wiped, tmux's focus-events notice wiped) come within
    # about 20 s, then nothing
    assert pane.quiet(10, timeout=60) < 30
    # The key reached the API, the Write's result went back, and nothing else was asked.
    first, second = standin.messages()
    assert first.headers["x-api-key"] == API_KEY
    assert "add hello.txt" in first.text()
    (result,) = second.tool_results()
    assert not result.get("is_error"), result
    assert standin.pending() == 0
    assert standin.others() == []

    # When the user types /exit, Claude ends, with exit status 0
    pane.type("/exit")
    assert pane.exited() == 0
    assert len(standin.messages()) == 2


def test_a_refused_write_is_not_written_and_claude_waits_for_a_message(
    claude: Start, standin: AnthropicStandin, repo: Path
) -> None:
    standin.write_file("hello.txt", "never written\n")
    pane = claude("add hello.txt")
    pane.wait_for("Do you want to create hello.txt?")

    # When the question is answered No (the third choice)
    pane.type("3")

    # Then nothing is written, the refusal shows, and Claude waits without asking the API
    # again: a refusal ends the turn, for the user to say what to do instead
    screen = pane.wait_until(waiting_for_a_message, "Claude waiting for a message")
    assert "Rejected write to hello.txt" in screen
    assert not (repo / "hello.txt").exists()
    assert len(standin.messages()) == 1
    pane.type("/exit")
    assert pane.exited() == 0
