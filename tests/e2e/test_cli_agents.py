"""Agent types from slotline.yaml: submit by name and prompt, limits applied by serve."""

from __future__ import annotations

from pathlib import Path

from waiting import until

from .conftest import Run, Serve, ok

CONFIG = """\
max_concurrent: 2
agents:
  echoer:
    command: [sh, -c, 'printf "%s" "$0" > prompt.txt', "{prompt}"]
    max_concurrent: 1
    timeout: 600
    max_attempts: 2
    memory_mb: 512
  pm:
    command: [sleep, "{prompt}"]
    global_pool: false
limits:
  - {key: workspace, max: 3}
"""


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "slotline.yaml"
    path.write_text(CONFIG)
    return path


def test_submit_by_agent_type_fills_the_prompt_as_one_argument(cli: Run, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    prompt = 'fix it; rm -rf / "$(whoami)"'
    task = ok(
        cli("--json", "--config", str(config), "submit", "--agent", "echoer", "--prompt", prompt)
    )
    assert task["command"] == ["sh", "-c", 'printf "%s" "$0" > prompt.txt', prompt]
    assert (task["agent"], task["timeout"], task["max_attempts"]) == ("echoer", 600, 2)
    assert task["memory_mb"] == 512
    assert task["title"] == prompt


def test_flags_beat_the_agent_type_defaults(cli: Run, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    task = ok(
        cli("--json", "--config", str(config), "submit", "--agent", "echoer", "--prompt", "x",
            "--max-attempts", "1", "--timeout", "5")
    )  # fmt: skip
    assert (task["max_attempts"], task["timeout"]) == (1, 5)


def test_agent_type_errors_are_one_line(cli: Run, tmp_path: Path) -> None:
    config = str(write_config(tmp_path))
    unknown = cli("--config", config, "submit", "--agent", "nope", "--prompt", "x")
    assert unknown.code == 1
    assert unknown.error_line() == "error: unknown agent type 'nope' (known: echoer, pm)"
    both = cli("--config", config, "submit", "--agent", "echoer", "--prompt", "x", "--", "ls")
    assert both.code == 1
    assert "not both" in both.error_line()
    no_prompt = cli("--config", config, "submit", "--agent", "echoer")
    assert no_prompt.error_line() == "error: agent type 'echoer' needs a prompt"
    bad = tmp_path / "bad.yaml"
    bad.write_text("agents:\n  x:\n    comand: [x]\n")
    invalid = cli("--config", str(bad), "submit", "--agent", "x", "--prompt", "p")
    assert invalid.code == 1
    assert f"{bad}:3: agents.x.comand" in invalid.error_line()


def test_serve_applies_the_config_and_runs_the_agent(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    config = str(write_config(tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    serve("--config", config)
    limits = ok(cli("--json", "limits"))
    assert limits["max_concurrent"] == 2
    assert {"key": "agent", "value": "echoer", "max": 1, "origin": "config"} in limits["limits"]
    assert {"key": "workspace", "value": None, "max": 3, "origin": "config"} in limits["limits"]
    assert limits["exempt_agents"] == ["pm"]
    assert "running tasks with agent echoer; from slotline.yaml" in cli("limits").out

    task = ok(
        cli("--json", "--config", config, "submit", "--agent", "echoer", "--workspace",
            str(work), "--prompt", "hello world")
    )  # fmt: skip
    until(lambda: ok(cli("--json", "show", task["id"]))["status"] == "succeeded")
    assert (work / "prompt.txt").read_text() == "hello world"


def test_an_agent_types_variables_reach_its_runs_only(
    cli: Run, serve: Serve, tmp_path: Path, base_env: dict[str, str]
) -> None:
    # Given a node whose environment holds a key and a setting meant for one agent type
    config = tmp_path / "keys.yaml"
    script = 'printf "%s %s" "${TEST_AGENT_KEY-unset}" "${TEST_AGENT_OPT-unset}" > "$0"'
    prints_key = f"""[sh, -c, '{script}', "{{prompt}}"]"""
    config.write_text(
        f"agents:\n  keyed:\n    command: {prints_key}\n"
        "    env_required: [TEST_AGENT_KEY]\n    env_allow: [TEST_AGENT_O*]\n"
        f"  other:\n    command: {prints_key}\n"
    )
    base_env.update(TEST_AGENT_KEY="key-of-keyed", TEST_AGENT_OPT="opt")
    serve("--config", str(config))
    # When a run of each type prints what it sees, and a command of the local user's
    # own labelled with the type does too (the local CLI may: it runs as the node's user)
    seen = {}
    for agent in ("keyed", "other", "raw"):
        out = tmp_path / f"{agent}.txt"
        how = ["--prompt", str(out)] if agent != "raw" else ["--", "sh", "-c", script, str(out)]
        label = "keyed" if agent == "raw" else agent
        task = ok(cli("--json", "--config", str(config), "submit", "--agent", label, *how))
        until(lambda: ok(cli("--json", "show", task["id"]))["status"] == "succeeded")  # noqa: B023
        seen[agent] = out.read_text()
    # Then the key and the setting reached the runs of the type, and not the other's
    assert seen == {"keyed": "key-of-keyed opt", "other": "unset unset", "raw": "key-of-keyed opt"}
