"""Whether each agent type can run on this machine: its binary on the PATH, its variables
set, a dry run (`slotline agents check`; `slotline serve` logs the first two at start)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from slotline.config.agent_types import AgentType
from slotline.runner.env import BASE_ALLOW, allow_list, allowed_env

# A dry run that takes longer than this failed: `--version` answers in a second or two.
PROBE_TIMEOUT = 20.0


class Level(StrEnum):
    """How a check went: OK, WARN (a run may still work), FAIL (no run can work)."""

    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"


@dataclass(frozen=True, slots=True)
class Finding:
    """One check of one agent type, with the reason (never a variable's value)."""

    agent: str
    check: Literal["binary", "env", "probe", "tmux"]
    level: Level
    detail: str

    def to_dict(self) -> dict[str, Any]:
        level, detail = str(self.level), self.detail
        return {"agent": self.agent, "check": self.check, "level": level, "detail": detail}


def check_agents(
    agents: Mapping[str, AgentType],
    env_allow: Sequence[str] = (),
    *,
    probe: bool = True,
    environ: Mapping[str, str] | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> list[Finding]:
    """The findings of each agent type, in name order. `env_allow` is the node's (beside
    the base list): each type's checks see what its runs would (`allow_list`). The dry
    runs (`probe`) run side by side, each under `timeout`.
    """
    source = os.environ if environ is None else environ
    names = sorted(agents)
    found = {name: _static(name, agents[name], env_allow, source) for name in names}
    if probe:
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(names)))) as pool:
            runs = {
                name: pool.submit(_probe, name, agents[name], env_allow, source, timeout)
                for name in names
                if _probe_argv(agents[name])[0] != agents[name].command[0]
                or found[name][0].level is Level.OK
            }
            for name, run in runs.items():
                found[name].append(run.result())
    return [finding for name in names for finding in found[name]]


def _static(
    name: str, agent: AgentType, env_allow: Sequence[str], source: Mapping[str, str]
) -> list[Finding]:
    """Its binary and its `env_required` variables (the `env_allow` ones are optional:
    not checked): quick, no process started."""
    env = allowed_env(allow_list(env_allow, agent), source)
    binary = agent.command[0]
    where = shutil.which(binary, path=env.get("PATH", ""))
    findings = [
        Finding(name, "binary", Level.OK, where)
        if where is not None
        else Finding(name, "binary", Level.FAIL, f"{binary} is not found on the PATH runs get")
    ]
    missing = [variable for variable in agent.env_required if not source.get(variable)]
    for variable in missing:
        detail = (
            f"{variable} is not set in this environment: a run will likely fail without "
            "it, unless the agent logs in another way (credentials under HOME)"
        )
        findings.append(Finding(name, "env", Level.WARN, detail))
    if agent.env_required and not missing:
        some = "is" if len(agent.env_required) == 1 else "are"
        detail = f"{', '.join(agent.env_required)} {some} set"
        findings.append(Finding(name, "env", Level.OK, detail))
    if agent.interactive:
        tmux = shutil.which("tmux")  # the node's, not the runs': it starts the terminals
        findings.append(
            Finding(name, "tmux", Level.OK, tmux)
            if tmux is not None
            else Finding(
                name, "tmux", Level.FAIL, "interactive runs need tmux, which is not installed"
            )
        )
    return findings


def _probe_argv(agent: AgentType) -> list[str]:
    return agent.probe or [agent.command[0], "--version"]


def _probe(
    name: str,
    agent: AgentType,
    env_allow: Sequence[str],
    source: Mapping[str, str],
    timeout: float,
) -> Finding:
    """Run its dry run as a run of its type would be run: no shell, the env it would get,
    its own process group (killed whole on a timeout), no input."""
    argv = _probe_argv(agent)
    shown = shlex.join(argv)
    env = allowed_env(allow_list(env_allow, agent), source)
    try:
        process = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        return Finding(name, "probe", Level.FAIL, f"{shown} could not start: {exc.strerror}")
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return Finding(name, "probe", Level.FAIL, f"{shown} did not end in {timeout:g}s")
    said = _first_line(out.decode(errors="replace"), env)
    if process.returncode != 0:
        return Finding(name, "probe", Level.FAIL, f"{shown} exited {process.returncode}{said}")
    return Finding(name, "probe", Level.OK, f"{shown} exited 0{said}")


def _first_line(output: str, env: Mapping[str, str]) -> str:
    """`: ` and the output's first non-empty line, cut short, with the value of any
    variable the base list would not pass (an API key) masked."""
    line = next((each.strip() for each in output.splitlines() if each.strip()), "")
    base = allowed_env(BASE_ALLOW, env)
    for variable, value in env.items():
        if variable not in base and len(value) >= 4:
            line = line.replace(value, "***")
    return f": {line[:120]}" if line else ""
