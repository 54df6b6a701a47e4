"""`slotline agents check`: each agent type's binary, variables and dry run; and the
warnings `slotline serve` logs at start for a type that cannot run."""

from __future__ import annotations

import os
from pathlib import Path

from waiting import until

from .conftest import Run, Serve, ok

CONFIG = """\
agents:
  gone:
    command: [no-such-agent-binary, "{prompt}"]
  keyed:
    command: [sh, -c, 'true', "{prompt}"]
    env_required: [CHECK_SET_KEY, CHECK_UNSET_KEY, CHECK_UNSET_TOO]
    env_allow: [CHECK_OPTIONAL, CHECK_GLOB_*]
    probe: [sh, -c, 'echo "agent 1.2 $CHECK_SET_KEY"']
  refusing:
    command: [sh, -c, 'true', "{prompt}"]
    env_required: [CHECK_SET_KEY]
    env_allow: [CHECK_OPTIONAL]
    probe: [sh, -c, 'echo "cannot start" >&2; exit 3']
  plain:
    command: [sh, "{prompt}"]
    probe: [sh, -c, 'echo "sh is here"']
"""
SECRET = "sk-check-secret-value"


def write_config(tmp_path: Path) -> str:
    path = tmp_path / "agents.yaml"
    path.write_text(CONFIG)
    return str(path)


def test_check_says_ok_warn_or_fail_for_each_type_and_why(cli: Run, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    done = cli("--config", config, "agents", "check", env={"CHECK_SET_KEY": SECRET})
    assert done.code == 1, done.err  # a FAIL
    lines = [line.split(None, 3) for line in done.out.splitlines()]
    assert [line[:3] for line in lines] == [
        ["gone", "FAIL", "binary"],
        ["keyed", "OK", "binary"],
        ["keyed", "WARN", "env"],
        ["keyed", "WARN", "env"],
        ["keyed", "OK", "probe"],
        ["plain", "OK", "binary"],
        ["plain", "OK", "probe"],
        ["refusing", "OK", "binary"],
        ["refusing", "OK", "env"],
        ["refusing", "FAIL", "probe"],
    ]
    detail = {(line[0], line[2]): line[3] for line in lines}
    assert detail["gone", "binary"] == "no-such-agent-binary is not found on the PATH runs get"
    # A warning for each required name that is unset, never a value; the optional ones
    # (env_allow) are not checked.
    unset = [line[3] for line in lines if line[:3] == ["keyed", "WARN", "env"]]
    assert unset == [
        f"{name} is not set in this environment: a run will likely fail without it, "
        "unless the agent logs in another way (credentials under HOME)"
        for name in ("CHECK_UNSET_KEY", "CHECK_UNSET_TOO")
    ]
    assert detail["refusing", "env"] == "CHECK_SET_KEY is set"
    assert SECRET not in done.out
    assert detail["keyed", "probe"].endswith("exited 0: agent 1.2 ***")
    assert detail["refusing", "probe"].endswith("exited 3: cannot start")
    assert detail["plain", "binary"].endswith("/sh")


def test_check_of_one_type_in_json(cli: Run, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    report = ok(cli("--json", "--config", config, "agents", "check", "plain"))
    assert report["ok"] is True
    assert [(c["agent"], c["check"], c["level"]) for c in report["checks"]] == [
        ("plain", "binary", "OK"),
        ("plain", "probe", "OK"),
    ]
    assert set(report["checks"][1]) == {"agent", "check", "level", "detail"}
    failing = cli("--config", config, "agents", "check", "gone", "--json")
    assert failing.code == 1
    assert failing.json()["ok"] is False
    unknown = cli("--config", config, "agents", "check", "nope")
    assert unknown.code == 1
    assert unknown.error_line().startswith("error: unknown agent type 'nope'")


def test_a_probe_that_hangs_fails_after_its_timeout(cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "slow.yaml"
    path.write_text("agents:\n  slow:\n    command: [sh]\n    probe: [sleep, '600']\n")
    done = cli("--config", str(path), "agents", "check", "--timeout", "0.5")
    assert done.code == 1
    assert "FAIL  probe  sleep 600 did not end in 0.5s" in done.out


def test_serve_warns_at_start_about_types_that_cannot_run(
    cli: Run, serve: Serve, tmp_path: Path, base_env: dict[str, str]
) -> None:
    base_env["CHECK_SET_KEY"] = SECRET
    node = serve("--config", write_config(tmp_path))
    # Its warnings were logged before it said it is up; read what is there, no more.
    assert node.stderr is not None
    fd = node.stderr.fileno()
    os.set_blocking(fd, False)
    logged = os.read(fd, 1 << 16).decode()
    os.set_blocking(fd, True)
    warnings = [line for line in logged.splitlines() if "WARNING" in line]
    assert len(warnings) == 3, logged
    assert "agent type gone: binary: no-such-agent-binary is not found" in warnings[0]
    assert "agent type keyed: env: CHECK_UNSET_KEY is not set" in warnings[1]
    assert "agent type keyed: env: CHECK_UNSET_TOO is not set" in warnings[2]
    assert "CHECK_OPTIONAL" not in logged  # an env_allow name is passed, not checked
    assert SECRET not in logged
    assert "probe" not in logged  # no dry run at start: `agents check` makes them
    # And it runs tasks all the same.
    task = ok(cli("--json", "submit", "--", "true"))
    until(lambda: ok(cli("--json", "show", task["id"]))["status"] == "succeeded")
