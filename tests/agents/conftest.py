"""The real coding-agent CLIs, driven as docs/coding-agents.md configures them.

`.ci/agents` installs them, pinned, under $SLOTLINE_AGENTS_DIR (default
~/.cache/slotline/agents). Each test points its agent at a stand-in of the model API it
calls, served on 127.0.0.1 by the test itself: no request leaves the machine. Without the
CLIs the tests skip on a laptop and fail in CI, where `.ci/run` installs them.

What every agent's tests share is here; a test module gives only what sets its agent
apart: `agent` (its name, and what of this machine's environment it would read), and
`agent_env` (the variables, and files under `home`, that point it at its stand-in).
Tests drive the node through `node`: start it with the docs' config, submit to the
agent in `repo`, wait for the task to end, read it back, diff and merge it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import e2e.conftest
from e2e.conftest import Run, Serve, ok
from gitrepos import make_repo
from waiting import until

from .openai_standin import OpenAIStandin

# The e2e fixtures run the CLI and `slotline serve` for real; `base_env` below gives them a
# machine of the test's own, starting from e2e's, here under the name `e2e_env` (a fixture
# is known by the name it is assigned to).
cli = e2e.conftest.cli
serve = e2e.conftest.serve
store_path = e2e.conftest.store_path
e2e_env = e2e.conftest.base_env

IN_CI = bool(os.environ.get("CI"))
AGENTS_DIR = Path(
    os.environ.get("SLOTLINE_AGENTS_DIR", Path.home() / ".cache" / "slotline" / "agents")
)
DOCS = Path(__file__).resolve().parents[2] / "docs"

# Where .ci/agents puts each CLI.
BINARIES = {
    "claude": AGENTS_DIR / "npm" / "node_modules" / ".bin" / "claude",
    "codex": AGENTS_DIR / "npm" / "node_modules" / ".bin" / "codex",
    "opencode": AGENTS_DIR / "npm" / "node_modules" / ".bin" / "opencode",
    "aider": AGENTS_DIR / "aider" / "bin" / "aider",
}

# What the CLIs would otherwise send beyond the model API (telemetry, update checks, error
# reports): each is turned off, so that the stand-in is the only address they talk to.
QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}

ENDED = {"succeeded", "failed", "cancelled", "expired", "blocked"}
# A run of an agent CLI takes one to a few seconds (aider's, litellm's import); a loaded
# CI machine, much more.
RUN_TIMEOUT = 120.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None and "/agents/" in str(item.path):
            item.add_marker(pytest.mark.timeout(300))


def require_agent(name: str) -> Path:
    """The path of a real agent CLI: skip on a laptop without it, fail in CI."""
    path = BINARIES[name]
    if os.access(path, os.X_OK):
        return path
    if IN_CI:
        pytest.fail(f"{name} is required in CI but {path} is missing (.ci/agents installs it)")
    pytest.skip(f"{name} not installed at {path} (run .ci/agents)")


@dataclass(frozen=True)
class Agent:
    """The agent CLI a test module drives, and what its tests set apart from the others'."""

    name: str  # its agent type in the docs' slotline.yaml, and its binary
    # The prefixes of the variables it reads: this machine's are left out of the test's
    # environment, which sets its own (`agent_env`).
    reads: tuple[str, ...]
    # What this machine's runs need passed beyond the docs' agent type (`env_allow`).
    env_allow: tuple[str, ...] = ()


def installed(name: str, reads: tuple[str, ...], env_allow: tuple[str, ...] = ()) -> Agent:
    """The agent `name`; without its CLI, the test skips (fails in CI: `require_agent`)."""
    require_agent(name)
    return Agent(name, reads, env_allow)


@pytest.fixture
def agent_path() -> str:
    """A PATH on which the installed agent CLIs are found by their plain names, as the
    docs' argv templates (`[claude, -p, …]`) name them."""
    folders = {str(path.parent) for path in BINARIES.values() if os.access(path, os.X_OK)}
    return os.pathsep.join([*sorted(folders), os.environ.get("PATH", os.defpath)])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The HOME of the test's machine: none of the user's agent settings and sessions."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def base_env(
    e2e_env: dict[str, str],
    agent: Agent,
    agent_path: str,
    home: Path,
    agent_env: dict[str, str],
) -> dict[str, str]:
    """The environment of the node and the CLI: e2e's, without this machine's variables
    the agent reads, with the agent CLIs on the PATH, `home`, and the agent's `agent_env`."""
    env = {k: v for k, v in e2e_env.items() if not k.startswith(agent.reads)}
    return {**env, "PATH": agent_path, "HOME": str(home), **agent_env}


@pytest.fixture
def api() -> Iterator[OpenAIStandin]:
    """The OpenAI API stand-in of one test (stopped at its end), for Codex, opencode and
    aider."""
    with OpenAIStandin() as standin:
        yield standin


@pytest.fixture
def repo_files() -> dict[str, str]:
    """The files of `repo`'s one commit."""
    return {"README.md": "hello\n"}


@pytest.fixture
def repo(tmp_path: Path, repo_files: dict[str, str]) -> Path:
    """The user's repository, with `main` checked out: where the tasks run."""
    return make_repo(tmp_path / "repo", repo_files)


def docs_yaml_blocks(page: str) -> list[str]:
    """Every ```yaml block of a docs page, in order."""
    text = (DOCS / page).read_text()
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.S)


def docs_agents_config() -> dict[str, Any]:
    """The first yaml block of docs/coding-agents.md: the configuration the docs tell users
    to copy, with an agent type for each CLI. Tests load this very block."""
    config = yaml.safe_load(docs_yaml_blocks("coding-agents.md")[0])
    assert isinstance(config, dict)
    assert "agents" in config
    return config


class Node:
    """The test's `slotline serve`, as the user reaches it through the CLI: the tasks of
    the test's agent, in the test's repository."""

    def __init__(self, cli: Run, serve: Serve, folder: Path, agent: Agent, repo: Path) -> None:
        self._cli = cli
        self._serve = serve
        self._folder = folder
        self._agent = agent
        self._repo = repo

    def start(self, config: dict[str, Any] | None = None) -> None:
        """`slotline serve` with the docs' slotline.yaml (or `config`) in its folder, plus
        what this machine's runs need beyond the docs' agent type (`Agent.env_allow`)."""
        config = config or docs_agents_config()
        if self._agent.env_allow:
            config["env_allow"] = [*config.get("env_allow", []), *self._agent.env_allow]
        (self._folder / "slotline.yaml").write_text(yaml.safe_dump(config))
        self._serve()

    def submit(self, prompt: str = "add hello.txt") -> str:
        """A task for the agent in the repository; returns its id."""
        task = ok(self._cli("--json", "submit", "--agent", self._agent.name,
                            "--prompt", prompt, "--workspace", str(self._repo)))  # fmt: skip
        return str(task["id"])

    def show(self, task_id: str) -> dict[str, Any]:
        """`show --json` of the task."""
        shown: dict[str, Any] = ok(self._cli("--json", "show", task_id))
        return shown

    def ended(
        self, task_id: str, timeout: float = RUN_TIMEOUT, attempts: int | None = None
    ) -> dict[str, Any]:
        """The task once it has ended: every attempt it will make, or (given `attempts`)
        the number of attempts it ended with this time."""
        what = f"task {task_id} ended" if attempts is None else f"attempt {attempts} ended"
        return until(
            lambda: (t := self.show(task_id))["status"] in ENDED
            and (attempts is None or len(t["attempts"]) == attempts) and t,
            timeout=timeout, what=what,
        )  # fmt: skip

    def status(self) -> dict[str, Any]:
        """`status --json` of the node."""
        status: dict[str, Any] = ok(self._cli("--json", "status"))
        return status

    def backing_off(self) -> dict[str, Any]:
        """`status --json` once an agent type backs off."""
        return until(
            lambda: (s := self.status())["backoff"] and s,
            timeout=RUN_TIMEOUT, what=f"{self._agent.name} backing off",
        )  # fmt: skip

    def events(self) -> list[dict[str, Any]]:
        """`events --json` of the node."""
        events: list[dict[str, Any]] = ok(self._cli("--json", "events"))
        return events

    def terminate(self, task_id: str, *options: str) -> None:
        """`slotline terminate TASK OPTIONS…`, which succeeds."""
        self._succeeds("terminate", task_id, *options)

    def restart(self, task_id: str) -> None:
        """`slotline restart TASK`, which succeeds."""
        self._succeeds("restart", task_id)

    def followup(self, task_id: str, prompt: str) -> str:
        """A follow-up of the task, given `prompt`; returns its id."""
        task = ok(self._cli("--json", "followup", task_id, "--prompt", prompt))
        return str(task["id"])

    def diff(self, task_id: str) -> str:
        """What `slotline diff` prints of the task's run."""
        return self._succeeds("diff", task_id)

    def merge(self, task_id: str) -> None:
        """`slotline merge` of the task's run into the checked-out `main`: it succeeds."""
        self._succeeds("merge", task_id)

    def _succeeds(self, *args: str) -> str:
        result = self._cli(*args)
        assert result.code == 0, result.err
        return result.out


@pytest.fixture
def node(cli: Run, serve: Serve, tmp_path: Path, agent: Agent, repo: Path) -> Node:
    """The test's node (started by `Node.start`, stopped at the test's end)."""
    return Node(cli, serve, tmp_path, agent, repo)


def log_of(attempt: dict[str, Any]) -> str:
    """What the agent printed in the attempt (its log)."""
    return Path(attempt["log_path"]).read_text()


def json_events(attempt: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON events the agent printed, one a line (`{"type": …}`), in the attempt."""
    return [json.loads(line) for line in log_of(attempt).splitlines()
            if line.startswith('{"type":')]  # fmt: skip
