from pathlib import Path

import pytest

from slotline.config import load_config, redacted
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
