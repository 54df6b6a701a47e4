"""An agent type's `usage` rules: what they read from a run's output, and the
configuration errors a bad rule is (naming file, line and key)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotline.config.file import load_config
from slotline.errors import InvalidInput
from slotline.models import Usage
from slotline.pacing.spend import run_share
from slotline.pacing.usage import TAIL_BYTES, UsageConfig, read_log, read_usage

CLAUDE = UsageConfig.model_validate(
    {
        "json": {
            "cost_usd": "total_cost_usd",
            "input_tokens": "usage.input_tokens",
            "output_tokens": "usage.output_tokens",
            "session_id": "session_id",
        }
    }
)
AIDER = UsageConfig.model_validate(
    {
        "regex": {
            "cost_usd": r"Cost: \$([0-9.]+) message",
            "input_tokens": r"Tokens: ([0-9,.k]+) sent",
        }
    }
)
RESULT = {"type": "result", "total_cost_usd": 0.12, "session_id": "abc",
          "usage": {"input_tokens": 1200, "output_tokens": 34}}  # fmt: skip


def test_json_reads_the_last_object_of_a_stream_of_json_lines() -> None:
    first = {**RESULT, "total_cost_usd": 9.0, "session_id": "old"}
    text = "\n".join([json.dumps(first), "some text", json.dumps(RESULT), ""])
    reading = read_usage(CLAUDE, text)
    assert reading.usage == Usage(0.12, 1200, 34)
    assert reading.session_id == "abc"


def test_json_reads_a_pretty_printed_result() -> None:
    reading = read_usage(CLAUDE, json.dumps(RESULT, indent=2))
    assert reading.usage == Usage(0.12, 1200, 34)


def test_a_path_that_matches_nothing_leaves_the_value_null() -> None:
    reading = read_usage(CLAUDE, json.dumps({"total_cost_usd": "0.5"}))
    assert reading.usage == Usage(0.5, None, None)
    assert reading.session_id is None
    assert read_usage(CLAUDE, "no json here").usage is None


def test_an_amount_no_database_can_hold_is_not_believed() -> None:
    # (a run printing 1e20 tokens must not fail the claim that carries its report)
    huge = {**RESULT, "usage": {"input_tokens": 1e20, "output_tokens": 2**53}}
    reading = read_usage(CLAUDE, json.dumps(huge))
    assert reading.usage == Usage(0.12, None, 2**53)


def test_regex_reads_the_last_match_with_thousands_separators() -> None:
    text = (
        "Tokens: 10 sent, 2 received. Cost: $0.01 message, $0.01 session.\n"
        "Tokens: 12,345 sent, 99 received. Cost: $0.25 message, $0.26 session.\n"
    )
    assert read_usage(AIDER, text).usage == Usage(0.25, 12345, None)


def test_read_log_reads_only_the_tail(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    early = json.dumps({**RESULT, "session_id": "early"})
    log.write_text(early + "\n" + "x" * (TAIL_BYTES + 10) + "\n")
    assert read_log(CLAUDE, log).session_id is None
    assert read_log(CLAUDE, tmp_path / "missing.log").usage is None


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "slotline.yaml"
    path.write_text(text)
    return path


def test_an_invalid_pattern_is_a_config_error_naming_file_line_and_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "agents:\n  aider:\n    command: [aider]\n    usage:\n"
        "      regex: {cost_usd: '(?<=x)([0-9]+)'}\n",
    )
    with pytest.raises(InvalidInput) as info:
        load_config(path)
    assert f"{path}:5: agents.aider.usage.regex: cost_usd:" in str(info.value)
    assert "not a valid regex" in str(info.value)


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("json: {price: total_cost_usd}", "unknown key 'price'"),
        ("regex: {cost_usd: 'Cost: [0-9]+'}", "has no group"),
        ("jsn: {cost_usd: x}", "jsn"),
    ],
)
def test_bad_usage_rules_are_config_errors(tmp_path: Path, rules: str, message: str) -> None:
    path = write(tmp_path, f"agents:\n  a:\n    command: [a]\n    usage:\n      {rules}\n")
    with pytest.raises(InvalidInput) as info:
        load_config(path)
    assert f"{path}:5:" in str(info.value)
    assert message in str(info.value)


def test_resume_templates_are_checked(tmp_path: Path) -> None:
    good = write(
        tmp_path,
        "agents:\n  c:\n    command: [c, '{prompt}']\n"
        "    usage: {json: {session_id: session_id}}\n"
        "    resume: [c, --resume, '{session_id}', --, '{prompt}']\n",
    )
    agent = load_config(good).agents["c"]
    assert agent.resume_prompt == "continue where you stopped"
    assert agent.argv({"prompt": "go", "session_id": "s1"}, agent.resume) == [
        "c", "--resume", "s1", "--", "go",
    ]  # fmt: skip
    for body, message in [
        ("    resume: [c, '{prompt}']\n", "must contain {session_id}"),
        ("    resume: [c, '{session}']\n", "unknown placeholder {session}"),
    ]:
        path = write(tmp_path, "agents:\n  c:\n    command: [c]\n"
                     "    usage: {json: {session_id: s}}\n" + body)  # fmt: skip
        with pytest.raises(InvalidInput, match=message):
            load_config(path)
    no_rules = write(tmp_path, "agents:\n  c:\n    command: [c]\n    resume: [c, '{session_id}']\n")
    with pytest.raises(InvalidInput, match="resume needs usage rules that read session_id"):
        load_config(no_rules)
    in_command = write(tmp_path, "agents:\n  c:\n    command: [c, '{session_id}']\n")
    with pytest.raises(InvalidInput, match="unknown placeholder"):
        load_config(in_command)


CLAUDE_DENIALS = UsageConfig.model_validate(
    {"json": {"cost_usd": "total_cost_usd", "permission_denials": "permission_denials"}}
)


def test_permission_denials_are_read_one_tool_per_refusal() -> None:
    denials = [
        {"tool_name": "Write", "tool_use_id": "toolu_1", "tool_input": {"file_path": "a"}},
        {"tool_name": "Edit", "tool_use_id": "toolu_2", "tool_input": {}},
        {"tool_name": "Write", "tool_use_id": "toolu_3", "tool_input": {}},
        {"tool_use_id": "toolu_4"},
    ]
    text = json.dumps({**RESULT, "permission_denials": denials})
    assert read_usage(CLAUDE_DENIALS, text).denied == ("Write", "Edit", "Write", "?")
    assert read_usage(CLAUDE_DENIALS, json.dumps({**RESULT, "permission_denials": []})).denied == ()
    assert read_usage(CLAUDE_DENIALS, json.dumps(RESULT)).denied == ()  # no such field
    assert read_usage(CLAUDE_DENIALS, json.dumps({**RESULT, "permission_denials": 3})).denied == ()


def test_a_denial_pattern_counts_every_match() -> None:
    rules = UsageConfig.model_validate(
        {"regex": {"permission_denials": r"^Permission denied: (\w+)"}}
    )
    text = "Permission denied: Write\nok\nPermission denied: Bash\nPermission denied: Write\n"
    assert read_usage(rules, text).denied == ("Write", "Bash", "Write")


def test_the_session_totals_read_are_kept_by_key() -> None:
    # Given rules whose cost and tokens in are session totals (tokens out too, unread)
    rules = UsageConfig.model_validate(
        {
            "json": {"cost_usd": "total_cost_usd", "input_tokens": "usage.input_tokens"},
            "session_totals": ["cost_usd", "input_tokens", "output_tokens"],
        }
    )
    # Then the reading keeps each value read as a total, and nothing it did not read
    totals = {"cost_usd": 0.12, "input_tokens": 1200}
    assert read_usage(rules, json.dumps(RESULT)).usage == Usage(0.12, 1200, None, totals)
    # and rules without totals keep none
    per_run = read_usage(CLAUDE, json.dumps(RESULT)).usage
    assert per_run == Usage(0.12, 1200, 34)
    assert per_run.session_totals is None


@pytest.mark.parametrize(
    ("total", "before", "own", "warned"),
    [
        (0.21, None, 0.21, False),  # cost: the session's first recorded run
        (0.21, 0.104, 0.106, False),  # cost: a follow-up, the difference
        (0.104, 0.104, 0.0, False),  # nothing spent
        (0.05, 0.104, 0.05, True),  # less than before: taken whole, never negative
        (1400, None, 1400, False),  # tokens: the session's first recorded run
        (1400, 500, 900, False),  # tokens: Codex after `resume`, the difference
        (5100, 1100, 4000, False),
        (900, 1400, 900, True),  # less than before: taken whole
    ],
)
def test_a_run_that_continues_a_session_records_the_difference(
    total: float, before: float | None, own: float, warned: bool
) -> None:
    found, why = run_share(total, before)
    assert found == pytest.approx(own)
    assert type(found) is type(total)  # tokens stay whole numbers
    assert (why is not None) == warned


@pytest.mark.parametrize("keys", ["[cost]", "[cost_usd, session_id]"])
def test_an_unknown_session_total_is_a_config_error(tmp_path: Path, keys: str) -> None:
    path = write(
        tmp_path,
        f"agents:\n  c:\n    command: [c]\n    usage:\n      session_totals: {keys}\n",
    )
    with pytest.raises(InvalidInput) as info:
        load_config(path)
    unknown = keys.strip("[]").split(", ")[-1]
    assert f"{path}:5: agents.c.usage.session_totals: unknown key {unknown!r}" in str(info.value)
    assert "known: cost_usd, input_tokens, output_tokens" in str(info.value)
