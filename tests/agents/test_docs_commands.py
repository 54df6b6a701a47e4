"""Every command the README and the quickstart show, run as a new user runs them: in a
shell, from their own project folder, with the clone's `slotline` on the PATH, against a
node started by `scripts/serve` from that folder, with the real Claude Code CLI (against
the Anthropic API stand-in) as the `claude` of the docs.

The docs' ```sh blocks are read from the pages themselves, and each line is run through
bash as written. What a test machine must change is said where it is done, and is only:
- the clone is not cloned again (its `.venv` would be set up from PyPI once more):
  `~/slotline` is the clone itself;
- an id the docs make up (`3f2a`, `9c1d`, `TASK`) is the id of a task made for that line,
  in the state the line's verb needs (queued, ended, run in a worktree);
- a node's HTTP API listens on a free port (`--port 0`), not on 8765 (other tests run
  beside this one);
- a command that follows for ever (`events -f`, `top`) is stopped once it has shown what
  it follows, as a user would with Ctrl-C or `q`;
- `scripts/check` is not run: it is the test suite this test is part of.
`test_every_shell_line_of_the_docs_is_run` fails when the docs gain a line no test runs.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import API_READY, Lines
from gitrepos import make_repo
from waiting import until

from .anthropic_standin import AnthropicStandin
from .conftest import QUIET_ENV, Agent, installed

CLONE = Path(__file__).resolve().parents[2]
PAGES = {"README": CLONE / "README.md", "quickstart": CLONE / "docs" / "quickstart.md"}
IN_CI = bool(os.environ.get("CI"))
API_KEY = "sk-ant-standin-key"
# The docs' placeholders for a task id.
PLACEHOLDERS = re.compile(r"\b(3f2a|9c1d|TASK)\b")
ENDED = {"succeeded", "failed", "cancelled", "expired", "blocked"}

# The user's project: what the docs' commands run (`make test`, `make build`, …).
MAKEFILE = """\
test:
\t@echo tests pass
build:
\t@echo built
deploy:
\t@echo deployed
report:
\t@echo reported
"""

pytestmark = pytest.mark.slow


def shell_lines(page: str) -> list[str]:
    """The command lines of every ```sh block of a page, in order (blank lines out)."""
    blocks = re.findall(r"```sh\n(.*?)```", PAGES[page].read_text(), flags=re.S)
    return [line for block in blocks for line in block.splitlines() if line.strip()]


def inline_commands(page: str) -> list[str]:
    """Commands the page's prose shows to run (`cd … && …/scripts/serve`)."""
    return re.findall(r"`(cd [^`]*scripts/serve[^`]*)`", PAGES[page].read_text().replace("\n", " "))


def clone_venv() -> Path:
    """The clone's .venv/bin, made by scripts/serve or scripts/check (CI always has it)."""
    venv = CLONE / ".venv"
    installed_mark = venv / ".installed"
    fresh = (
        (venv / "bin" / "slotline").exists()
        and installed_mark.exists()
        and installed_mark.stat().st_mtime >= (CLONE / "pyproject.toml").stat().st_mtime
    )
    if not fresh:
        why = f"the clone's .venv ({venv}) is missing or older than pyproject.toml"
        if IN_CI:
            pytest.fail(f"{why}; scripts/check sets it up before the tests")
        pytest.skip(f"{why}: scripts/serve would set it up from PyPI first")
    return venv / "bin"


class User:
    """A user's shell: runs one line at a time through bash, keeping the folder and the
    variables (`set -a`: `build=$(…)` is seen by the next line) between lines."""

    def __init__(self, home: Path, env: dict[str, str], state: Path) -> None:
        self.cwd = home
        self.env = env
        self._state = state
        self.ran: list[str] = []
        self.nodes: list[subprocess.Popen[str]] = []  # running
        self.started: list[subprocess.Popen[str]] = []  # every node, closed at the end

    def run(self, line: str, doc_line: str | None = None, check: bool = True) -> str:
        """Run `line` (the docs' `doc_line`, with its placeholders filled in); returns what
        it printed. With `check`, it must exit 0 without a traceback."""
        self.ran.append(doc_line or line)
        cwd_file, env_file = self._state / "cwd", self._state / "env"
        script = (
            f"trap 'pwd > {shlex.quote(str(cwd_file))}; env -0 > {shlex.quote(str(env_file))}'"
            f" EXIT\nset -a -o pipefail\n{line}\n"
        )
        proc = subprocess.run(
            ["bash", "-c", script], cwd=self.cwd, env=self.env,
            capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        self.cwd = Path(cwd_file.read_text().strip())
        self.env = dict(
            item.split("=", 1) for item in env_file.read_text().split("\0") if "=" in item
        )
        if check:
            assert proc.returncode == 0, f"{line!r} exited {proc.returncode}: {proc.stderr}"
            assert "Traceback" not in proc.stderr, proc.stderr
        return proc.stdout

    def json(self, *args: str) -> Any:
        """`slotline --json ARGS` in the user's folder (a check of the test, not a docs line)."""
        out = subprocess.run(
            ["slotline", "--json", *args], cwd=self.cwd, env=self.env,
            capture_output=True, text=True, timeout=120, check=True,
        ).stdout  # fmt: skip
        return json.loads(out)

    def task(self, *submit: str) -> str:
        """A task made for a docs line (`slotline --json submit SUBMIT…`); returns its id."""
        return str(self.json("submit", *submit)["id"])

    def ended(self, task_id: str) -> dict[str, Any]:
        return until(
            lambda: (t := self.json("show", task_id))["status"] in ENDED and t,
            timeout=120, what=f"task {task_id} ended",
        )  # fmt: skip

    def start_node(self, line: str, doc_line: str) -> str:
        """Start the node a docs line starts (in the background, its HTTP API on a free
        port); returns its API's URL once it is up."""
        self.ran.append(doc_line)
        proc = subprocess.Popen(
            ["bash", "-c", f"{line} --port 0"], cwd=self.cwd, env=self.env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        self.nodes.append(proc)
        self.started.append(proc)
        ready = Lines(proc.stdout).until(lambda out: out.startswith(API_READY), timeout=120)
        return ready[len(API_READY) :].split()[0]

    def stop_nodes(self) -> None:
        """Ctrl-C to each node, as the quickstart says; each stops cleanly."""
        while self.nodes:
            proc = self.nodes.pop()
            os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=60) in (0, 130, -signal.SIGINT)

    def follow(self, line: str, doc_line: str, seen: str, keys: str | None = None) -> None:
        """Run a line that follows for ever until it has printed `seen`, then stop it as a
        user would: the `keys` typed (`q` for top, in a terminal), or Ctrl-C."""
        self.ran.append(doc_line)
        argv = ["bash", "-c", line]
        if keys is not None:  # a full-screen view needs a terminal: `script` gives one
            argv = ["script", "-qfec", line, "/dev/null"]
        proc = subprocess.Popen(
            argv, cwd=self.cwd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        assert proc.stdin is not None
        assert proc.stdout is not None
        out = Lines(proc.stdout)
        try:
            out.until(lambda text: seen in text, timeout=120)
            if keys is not None:
                proc.stdin.write(keys)
                proc.stdin.flush()
            else:
                os.killpg(proc.pid, signal.SIGINT)
            assert proc.wait(timeout=60) in (0, 130, -signal.SIGINT), line
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
            out.drained()
            proc.stdin.close()
            proc.stdout.close()


@pytest.fixture(autouse=True)
def agent() -> Agent:
    return installed("claude", reads=("ANTHROPIC_",))


@pytest.fixture
def standin() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as api:
        yield api


@pytest.fixture
def user(tmp_path: Path, agent_path: str, standin: AnthropicStandin) -> Iterator[User]:
    """A new user's machine: a HOME with the clone at ~/slotline and a project at
    ~/src/app (a git repository with a Makefile), the real claude on the PATH and its key
    set (at the stand-in), and no slotline settings of this machine's."""
    bin_dir = clone_venv()
    home = tmp_path / "home"
    home.mkdir()
    (home / "slotline").symlink_to(CLONE, target_is_directory=True)
    make_repo(home / "src" / "app", {"Makefile": MAKEFILE, "README.md": "my app\n"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLOTLINE_", "ANTHROPIC_"))}
    env.pop("VIRTUAL_ENV", None)
    env.update(
        HOME=str(home),
        PATH=os.pathsep.join(p for p in agent_path.split(os.pathsep) if p != str(bin_dir)),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CONFIG_HOME=str(home / ".config"),
        COLUMNS="200",
        PYTHONWARNINGS="error",
        ANTHROPIC_API_KEY=API_KEY,
        ANTHROPIC_BASE_URL=standin.url,
        **QUIET_ENV,
    )
    state = tmp_path / "shell"
    state.mkdir()
    shell = User(home, env, state)
    yield shell
    for proc in shell.nodes:  # a failed test's nodes: stop them, whatever they say
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    for proc in shell.started:
        if proc.stdout is not None:
            proc.stdout.close()


def iso(text: str) -> datetime:
    return datetime.fromisoformat(text)


def page_yaml(page: str) -> dict[str, Any]:
    """The page's slotline.yaml for a user's project (its first ```yaml block), as this
    machine runs it: the docs' CPU and memory thresholds, a guard for a user's laptop, would
    hold starts for as long as the rest of the suite keeps this machine busy; and the runs
    get what this machine's need beyond the docs' agent type (the stand-in's address, no
    traffic but the API's)."""
    (block, *_) = re.findall(r"```yaml\n(.*?)```", PAGES[page].read_text(), flags=re.S)
    config: dict[str, Any] = yaml.safe_load(block)
    config.pop("admission")
    config["env_allow"] = ["ANTHROPIC_BASE_URL", *QUIET_ENV]
    return config


def limits_of(listed: dict[str, Any]) -> dict[str, Any]:
    """max_concurrent and the per-key limits of a `limits` answer (CLI, HTTP) or of MCP's
    queue_status."""
    per_key = {f"{x['key']}[{x['value']}]": x["max"] for x in listed["limits"]}
    return {"max_concurrent": listed["max_concurrent"], **per_key}


def mcp_status(user: User) -> dict[str, Any]:
    """`queue_status` of the MCP server (`slotline mcp` on stdio) in the user's folder."""
    script = (
        "import asyncio, json, sys\n"
        "from mcp import ClientSession, StdioServerParameters\n"
        "from mcp.client.stdio import stdio_client\n"
        "async def main():\n"
        "    server = StdioServerParameters(command='slotline', args=['mcp'], env=None)\n"
        "    async with stdio_client(server) as (read, write):\n"
        "        async with ClientSession(read, write) as session:\n"
        "            await session.initialize()\n"
        "            result = await session.call_tool('queue_status', {})\n"
        "            print(result.content[0].text)\n"
        "asyncio.run(main())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=user.cwd, env=user.env,
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    status: dict[str, Any] = json.loads(out)
    return status


@pytest.mark.timeout(900)
def test_the_quickstart_from_a_users_folder(user: User, standin: AnthropicStandin) -> None:
    standin.say("Done: nothing needed changing.").always = True
    lines = iter(shell_lines("quickstart"))
    # §1: clone (~/slotline is the clone) and start a node with a limit of 2.
    clone = next(lines)
    assert clone == "git clone <this repository> slotline && cd slotline"
    user.run("cd slotline", clone)
    user.start_node(serve := next(lines), serve)

    # §2, in a second terminal (from HOME): three tasks, two run, the third waits.
    user.cwd = Path(user.env["HOME"])
    for _ in range(5):
        user.run(next(lines))
    assert "running" in user.run(next(lines))  # status
    third = user.json("ls")[2]
    assert third["title"] == "third"
    # `logs -f` of the third follows it until it has run.
    follow = next(lines)
    user.run(PLACEHOLDERS.sub(third["id"], follow), follow)
    # With a limit of 2, the first two ran and the third waited for one of them to end.
    runs = [user.ended(task["id"]) for task in user.json("ls")[:3]]
    assert [run["status"] for run in runs] == ["succeeded"] * 3
    first_end = min(iso(run["finished_at"]) for run in runs[:2])
    assert iso(runs[2]["started_at"]) >= first_end
    assert max(iso(run["started_at"]) for run in runs[:2]) < first_end

    # §3: each steering line, on a task in the state its verb needs.
    for _ in range(7):
        steer = next(lines)
        user.run(for_line(user, steer), steer)
    top = next(lines)
    user.follow("slotline top", top, seen="running", keys="q")

    # §4, in the user's project: wait, chain and watch.
    user.run(next(lines))  # cd ~/src/app
    user.run(next(lines))  # submit --wait: exits with make's exit code, 0
    user.run(next(lines))  # build=$(…)
    build = user.env["build"]
    user.run(next(lines))  # --after "$build"
    events = next(lines)
    user.follow(events.split("#")[0].strip(), events, seen=build[:8])
    user.run(next(lines))  # stats
    assert user.ended(build)["status"] == "succeeded"

    # §6: the project's slotline.yaml, and the node started again from the project.
    project = Path(user.env["HOME"]) / "src" / "app"
    (project / "slotline.yaml").write_text(yaml.safe_dump(page_yaml("quickstart")))
    user.stop_nodes()
    (restart,) = inline_commands("quickstart")
    url = user.start_node(restart, restart)
    claude = user.run(next(lines))
    assert next(lines, None) is None
    task_id = re.findall(r"^submitted (\w+):", claude, flags=re.M)[0]
    assert user.ended(task_id)["status"] == "succeeded"

    # The limits written in the yaml are the ones in force: on the CLI (in the project
    # and elsewhere), over HTTP (what the dashboard shows) and over MCP.
    written = {"max_concurrent": 3, "agent[claude]": 2}
    assert limits_of(user.json("limits")) == written
    with urllib.request.urlopen(f"{url}/api/limits", timeout=30) as answer:
        assert limits_of(json.loads(answer.read())) == written
    over_mcp = mcp_status(user)
    assert limits_of(over_mcp) == written
    # and from a folder without a slotline.yaml of its own (the node published them).
    user.cwd = Path(user.env["HOME"])
    assert limits_of(user.json("limits")) == written
    assert set(user.ran) == set(shell_lines("quickstart")) | {restart}
    user.stop_nodes()


def for_line(user: User, line: str, worktree_task: str | None = None) -> str:
    """`line` with its made-up task id replaced by a task in the state its verb needs."""
    if not PLACEHOLDERS.search(line):
        return line
    verb = line.split()[1]
    if worktree_task is not None and verb in ("diff", "merge"):
        target = worktree_task
    elif verb == "restart":
        target = user.task("--", "true")
        user.ended(target)
    elif verb == "logs":  # a run that ends: `logs -f` follows it to its end
        target = user.task("--", "echo", "hello from a run")
    else:  # queued, and kept there by its start time, an hour from now
        target = user.task("--in", "1h", "--title", f"to {verb}", "--", "sleep", "1")
    return PLACEHOLDERS.sub(target, line)


@pytest.mark.timeout(900)
def test_the_readme_from_a_users_project(user: User, standin: AnthropicStandin) -> None:
    home = Path(user.env["HOME"])
    project = home / "src" / "app"
    # The two commands at the top, in the clone: a node (stopped at once), and the
    # suite, which is not run here (this test is part of it).
    start, check = shell_lines("README")[:2]
    assert check.startswith("scripts/check")
    user.run("cd ~/slotline", "cd ~/slotline")
    user.start_node(start.split("#")[0].strip(), start)
    user.stop_nodes()

    # The project's slotline.yaml, and the node started from the project.
    (project / "slotline.yaml").write_text(yaml.safe_dump(page_yaml("README")))
    (serve,) = inline_commands("README")
    user.start_node(serve, serve)
    use = shell_lines("README")[2:]
    # In the clone, then the project.
    assert use[0].startswith("export PATH=")
    assert use[1] == "cd ~/src/app"
    user.run(use[0])
    user.run(use[1])
    assert user.cwd == project

    # A worktree run of claude, which writes a file: its diff, merged into main, pruned.
    standin.write_file("fixed.txt", "the flaky test is fixed\n")
    standin.say("I fixed it.")
    worktree, diff, merge, prune = use[-4:]
    submitted = user.run(worktree)
    (task_id,) = re.findall(r"^submitted (\w+):", submitted, flags=re.M)
    ended = user.ended(task_id)
    assert ended["status"] == "succeeded"
    assert "fixed.txt" in user.run(for_line(user, diff, task_id), diff)
    user.run(for_line(user, merge, task_id), merge)
    assert (project / "fixed.txt").read_text() == "the flaky test is fixed\n"
    user.run(prune)

    # Every other line, in order, against claude answering "done".
    standin.say("Done: nothing needed changing.").always = True
    for line in use[2:-4]:
        command = line.split("#")[0].strip()
        if command in ("slotline top", "slotline events -f"):
            keys = "q" if command.endswith("top") else None
            user.follow(command, line, seen="running" if keys else "submitted", keys=keys)
        else:  # `logs -f` too: of a run that ends
            user.run(for_line(user, line), line)
    assert user.json("status")["paused"]  # the last line: stop --yes

    # Every shell line of the README was run, but the suite itself.
    assert set(user.ran) | {check} == set(shell_lines("README")) | {serve, "cd ~/slotline"}
