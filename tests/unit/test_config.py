from pathlib import Path

import pytest

from slotline.config.file import load_config, redacted
from slotline.errors import InvalidInput

EXAMPLE = """\
max_concurrent: 4
limits:
  - {key: workspace, max: 1}
  - {key: agent, value: claude, max: 2}
agents:
  claude:
    command: [claude, -p, "{prompt}"]
    max_concurrent: 2
    timeout: 3600
    expected_duration: 900
  pm:
    command: [pm-agent, "--goal={prompt}"]
    global_pool: false
admission: {max_cpu_percent: 90, min_available_mb: 1024}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "slotline.yaml"
    path.write_text(text)
    return path


def test_a_full_file_loads(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXAMPLE), env={})
    assert config.max_concurrent == 4
    assert config.limits[1].value == "claude"
    assert not config.agents["pm"].global_pool
    assert config.admission.min_available_mb == 1024


def test_a_prompt_fills_one_argv_element_whatever_it_contains(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, EXAMPLE), env={})
    prompt = 'fix it; rm -rf / $(whoami) "quoted"'
    assert config.agent("claude").argv({"prompt": prompt}) == ["claude", "-p", prompt]
    assert config.agent("pm").argv({"prompt": "a b"}) == ["pm-agent", "--goal=a b"]


def test_errors_name_the_key_and_the_line(tmp_path: Path) -> None:
    path = write(
        tmp_path, "max_concurrent: 2\nagents:\n  claude:\n    command: []\n    timout: 3\n"
    )
    with pytest.raises(InvalidInput) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert f"{path}:4: agents.claude.command" in message
    assert f"{path}:5: agents.claude.timout: Extra inputs are not permitted" in message


def test_numbers_out_of_bounds_are_refused_saying_the_bound_in_words(tmp_path: Path) -> None:
    text = "max_concurrent: 99999999999\nagents:\n  claude:\n    command: [c]\n"
    path = write(tmp_path, text + "    timeout: 1.0e+20\n    memory_mb: 0\n")
    with pytest.raises(InvalidInput) as caught:
        load_config(path, env={})
    message = str(caught.value)
    assert f"{path}:1: max_concurrent: must be between 0 and 1,000,000,000, got 99999999999" in (
        message
    )
    timeout = "agents.claude.timeout: must be more than 0 seconds and at most 10 years, got 1e+20"
    assert f"{path}:5: {timeout}" in message
    assert f"{path}:6: agents.claude.memory_mb: must be between 1 MiB and 16 TiB, got 0" in message


def test_unknown_placeholder_and_bad_limit_key_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path, 'agents:\n  x: {command: [x, "{promt}"]}\nlimits: [{key: team, max: 1}]\n'
    )
    with pytest.raises(InvalidInput) as caught:
        load_config(path, env={})
    assert "unknown placeholder {promt}" in str(caught.value)
    assert "unknown limit key 'team'" in str(caught.value)


def test_environment_then_flags_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, EXAMPLE)
    assert load_config(path, env={"SLOTLINE_MAX_CONCURRENT": "6"}).max_concurrent == 6
    config = load_config(
        path, env={"SLOTLINE_MAX_CONCURRENT": "6"}, overrides={"max_concurrent": 8}
    )
    assert config.max_concurrent == 8


def test_the_file_is_found_through_slotline_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "max_concurrent: 7\n")
    monkeypatch.setenv("SLOTLINE_CONFIG", str(path))
    monkeypatch.chdir(tmp_path.parent)
    assert load_config(env={}).max_concurrent == 7
    monkeypatch.setenv("SLOTLINE_CONFIG", str(tmp_path / "missing.yaml"))
    with pytest.raises(InvalidInput, match="does not exist"):
        load_config(env={})


def test_redacted_hides_the_store_password() -> None:
    config = load_config(env={"SLOTLINE_STORE": "postgresql://me:secret@db:5432/q"})
    assert redacted(config)["store"] == "postgresql://me:***@db:5432/q"


def test_not_yaml_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not valid YAML"):
        load_config(write(tmp_path, "agents: [unclosed\n"), env={})


def test_a_prompt_that_would_be_an_option_is_refused_unless_the_type_opts_in(
    tmp_path: Path,
) -> None:
    from slotline.config.templates import expand_agent_type

    config = load_config(
        write(
            tmp_path,
            "agents:\n"
            "  bare: {command: [git, log, '{prompt}']}\n"
            "  dashed: {command: [git, log, --, '{prompt}']}\n"
            "  flag: {command: [git, log, '--grep={prompt}']}\n"
            "  opted: {command: [tool, '{prompt}'], prompt_may_start_with_dash: true}\n",
        )
    )
    with pytest.raises(InvalidInput, match="must not start with '-'"):
        expand_agent_type(config, {"agent": "bare"}, "--output=/x")
    assert expand_agent_type(config, {"agent": "bare"}, "a -b")["command"][-1] == "a -b"
    for agent in ("dashed", "flag", "opted"):
        filled = expand_agent_type(config, {"agent": agent}, "--output=/x")
        assert filled["command"][-1].endswith("--output=/x")


def test_a_title_or_user_or_a_prompt_inside_an_argument_is_no_option_either(
    tmp_path: Path,
) -> None:
    from slotline.config.templates import expand_agent_type

    config = load_config(
        write(
            tmp_path,
            "agents:\n"
            "  titled: {command: [git, log, '{title}', --, '{prompt}']}\n"
            "  user: {command: [tool, '{user}{prompt}'], prompt_may_start_with_dash: true}\n"
            "  sentence: {command: [tool, '{prompt} please']}\n"
            "  after: {command: [tool, --, '{title}', '{prompt}']}\n",
        )
    )
    with pytest.raises(InvalidInput, match=r"^title: must not start with '-'"):
        expand_agent_type(config, {"agent": "titled", "title": "--output=/x"}, "p")
    # The prompt's opt-in does not cover the user name that precedes it.
    with pytest.raises(InvalidInput, match=r"^user: must not start with '-'"):
        expand_agent_type(config, {"agent": "user", "user": "-e"}, "p")
    # An empty user leaves the prompt first, and the prompt may start with a dash there.
    assert expand_agent_type(config, {"agent": "user"}, "-e")["command"] == ["tool", "-e"]
    with pytest.raises(InvalidInput, match=r"^prompt: must not start with '-'"):
        expand_agent_type(config, {"agent": "sentence"}, "--output=/x")
    filled = expand_agent_type(config, {"agent": "after", "title": "-t"}, "-p")
    assert filled["command"] == ["tool", "--", "-t", "-p"]


@pytest.mark.parametrize(
    "agent",
    [
        "{command: ['{prompt}', x]}",
        "{command: [tool, '{prompt}'], prompt_may_start_with_dash: 'yes'}",
        "{command: [tool], timeout: '60'}",
        "{command: [tool], timeout: .inf}",
        "{command: [tool], max_concurrent: 99999999999999}",
    ],
)
def test_agent_types_are_validated_strictly(tmp_path: Path, agent: str) -> None:
    with pytest.raises(InvalidInput, match=r"agents\.a"):
        load_config(write(tmp_path, f"agents:\n  a: {agent}\n"))


@pytest.mark.parametrize("text", ["aging_interval: .inf", "max_concurrent: 9999999999999"])
def test_numbers_in_the_file_are_finite_and_bounded(tmp_path: Path, text: str) -> None:
    with pytest.raises(InvalidInput):
        load_config(write(tmp_path, text + "\n"))


def test_the_environment_allow_list_comes_from_slotline_env_allow_or_a_flag(
    tmp_path: Path,
) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text("env_allow: [FROM_FILE]\n")
    assert load_config(path, env={}).env_allow == ["FROM_FILE"]
    from_env = load_config(path, env={"SLOTLINE_ENV_ALLOW": "ONE, TWO THREE"})
    assert from_env.env_allow == ["ONE", "TWO", "THREE"]
    flagged = load_config(path, env={"SLOTLINE_ENV_ALLOW": "ONE"}, overrides={"env_allow": ["X"]})
    assert flagged.env_allow == ["X"]


def test_a_bad_env_allow_name_is_refused_with_its_file_line_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, "agents:\n  a:\n    command: [a]\n    env_allow: [OK_*, 'A=1']\n")
    with pytest.raises(InvalidInput, match=rf"{path}:4: agents\.a\.env_allow: 'A=1' is not"):
        load_config(path)
    with pytest.raises(InvalidInput, match=r"env_allow: 'no way' is not"):
        load_config(write(tmp_path, "env_allow: [PATH, no way]\n"))


def test_env_required_takes_plain_names_only_with_its_file_line_and_key(tmp_path: Path) -> None:
    text = "agents:\n  a:\n    command: [a]\n    env_required: [KEY, ANTHROPIC_*]\n"
    path = write(tmp_path, text)
    with pytest.raises(
        InvalidInput, match=rf"{path}:4: agents\.a\.env_required: 'ANTHROPIC_\*' is not an"
    ) as refused:
        load_config(path)
    assert "glob patterns go in env_allow" in str(refused.value)
    for bad in ("'A=1'", "1KEY", "'no way'"):
        text = f"agents:\n  a:\n    command: [a]\n    env_required: [{bad}]\n"
        with pytest.raises(InvalidInput, match=r"agents\.a\.env_required: .* is not an"):
            load_config(write(tmp_path, text))
    good = write(tmp_path, "agents:\n  a:\n    command: [a]\n    env_required: [KEY, _K2]\n")
    assert load_config(good).agents["a"].env_required == ["KEY", "_K2"]


def test_an_agent_type_has_its_own_max_disk_beside_the_global_one(tmp_path: Path) -> None:
    text = (
        "worktrees:\n  max_disk: 20GB\n  retain: 3d\nagents:\n  claude:\n"
        "    command: [claude, -p, '{prompt}']\n    isolation: worktree\n"
        "    max_disk: 5GB\n    retain: 1d\n  aider:\n    command: [aider, '{prompt}']\n"
    )
    policy = load_config(write(tmp_path, text), env={}).worktree_policy()
    assert (policy.max_disk, policy.agent_max_disk) == (20 * 10**9, {"claude": 5 * 10**9})
    assert policy.agent_retain == {"claude": 86_400}
    bad = write(tmp_path, "agents:\n  claude:\n    command: [claude]\n    max_disk: lots\n")
    with pytest.raises(InvalidInput, match=r":4: agents.claude.max_disk: .*'lots' is not a size"):
        load_config(bad, env={})
