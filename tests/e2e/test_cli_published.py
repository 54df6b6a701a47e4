"""A node publishes what it serves: a CLI on the store submits its agent types from any
folder, says when its own slotline.yaml differs, and `config` names the node's file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from waiting import until

from .conftest import Run, Serve, ok

NODE_YAML = """\
max_concurrent: 2
agents:
  writer:
    command: [sh, -c, 'printf "%s" "$0" > out.txt', "{prompt}"]
    max_attempts: 2
    timeout: 600
  reviewer:
    command: [sh, -c, 'printf "%s" "$0" > review.txt', "{prompt}"]
"""

# The same `writer` as the node's, but for where it writes.
LOCAL_YAML = """\
max_concurrent: 2
agents:
  writer:
    command: [sh, -c, 'printf "%s" "$0" > local.txt', "{prompt}"]
    max_attempts: 2
    timeout: 600
"""


def folder(tmp_path: Path, name: str, yaml: str | None = None) -> Path:
    made = tmp_path / name
    made.mkdir()
    if yaml is not None:
        (made / "slotline.yaml").write_text(yaml)
    return made


def published_nodes(cli: Run, cwd: Path) -> list[dict[str, Any]]:
    nodes: list[dict[str, Any]] = ok(cli("--json", "config", cwd=cwd))["nodes"]
    return nodes


def test_submit_from_a_folder_without_a_config_uses_the_running_nodes_agent_type(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given a node started with the configuration of folder A
    node_yaml = folder(tmp_path, "a", NODE_YAML) / "slotline.yaml"
    serve("--config", str(node_yaml))
    elsewhere = folder(tmp_path, "b")  # no slotline.yaml here, the store from SLOTLINE_STORE
    until(lambda: published_nodes(cli, elsewhere) != [])
    # When a task of its agent type is submitted from folder B
    submitted = cli("--json", "submit", "--agent", "writer", "--prompt", "hi there", cwd=elsewhere)
    # Then it is built from the type the node published, and the node runs it
    task = ok(submitted)
    assert submitted.err == ""
    assert task["command"] == ["sh", "-c", 'printf "%s" "$0" > out.txt', "hi there"]
    assert (task["agent"], task["max_attempts"], task["timeout"]) == ("writer", 2, 600)
    assert task["workspace"] == str(elsewhere)
    until(lambda: ok(cli("--json", "show", task["id"]))["status"] == "succeeded")
    assert (elsewhere / "out.txt").read_text() == "hi there"
    # And `config` there names the file the node read, and what this folder lacks
    (node,) = published_nodes(cli, elsewhere)
    assert (node["node"], node["source"]) == ("acceptance", str(node_yaml))
    assert node["differs"] == ["agents.reviewer", "agents.writer", "max_concurrent"]
    shown = ok_text(cli("config", cwd=elsewhere))
    assert f"#   acceptance: read {node_yaml}, published 20" in shown
    assert "differs here in agents.reviewer, agents.writer, max_concurrent" in shown


def test_a_local_type_that_differs_from_the_nodes_wins_with_a_warning(
    cli: Run, serve: Serve, tmp_path: Path
) -> None:
    # Given a node serving `writer` and `reviewer`, and a folder whose file has another
    # `writer`
    node_yaml = folder(tmp_path, "a", NODE_YAML) / "slotline.yaml"
    serve("--config", str(node_yaml))
    here = folder(tmp_path, "b", LOCAL_YAML)
    until(lambda: published_nodes(cli, here) != [])
    # When `writer` is submitted there
    submitted = cli("--json", "submit", "--agent", "writer", "--prompt", "x", cwd=here)
    # Then the local file's type builds the task, and one line on stderr says the node
    # serves another
    assert ok(submitted)["command"] == ["sh", "-c", 'printf "%s" "$0" > local.txt', "x"]
    local = here / "slotline.yaml"  # named as found: an absolute path
    assert [json.loads(line) for line in submitted.err.splitlines()] == [
        {
            "warning": f"agent type 'writer' of {local} differs from the one node acceptance "
            f"serves (command); this task uses {local}'s"
        }
    ]
    plain = cli("submit", "--agent", "writer", "--prompt", "x", cwd=here)
    assert plain.err.startswith(f"warning: agent type 'writer' of {local} differs")
    # A type only the node has still works from here; an unknown one names both sides'
    assert ok(cli("--json", "submit", "--agent", "reviewer", "--prompt", "y", cwd=here))
    unknown = cli("submit", "--agent", "nope", "--prompt", "x", cwd=here)
    assert unknown.code == 1
    assert unknown.error_line() == (
        "error: unknown agent type 'nope' (known: writer; served by running nodes: reviewer)"
    )
    # And `config` says where this folder's configuration differs from the node's
    (node,) = published_nodes(cli, here)
    assert node["differs"] == ["agents.reviewer", "agents.writer.command"]


def ok_text(result: Any) -> str:
    assert result.code == 0, result.err
    text: str = result.out
    return text
