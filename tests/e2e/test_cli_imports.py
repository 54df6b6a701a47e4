"""A command imports what it uses: what people see needs rich, a receipt or JSON does not;
help needs none of the server, the drivers or MCP; `serve` claims before it imports its
HTTP server, and without one never imports it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slotline.cli import COMMANDS

# Runs CLI commands in this interpreter (each argument list a JSON array), then prints
# which heavy packages they imported and the last one's exit code.
PROBE = """
import sys
from slotline.cli import main
for args in sys.argv[1:]:
    try:
        main(json.loads(args))
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "loaded": [m for m in HEAVY if m in sys.modules]}))
"""
HEAVY = (
    "rich", "pydantic", "asyncio", "httpx", "psutil", "yaml",
    "fastapi", "starlette", "uvicorn", "psycopg", "mcp", "slotline.store.base",
    "cronsim", "re2", "zoneinfo",
)  # fmt: skip
# What a server, a PostgreSQL store or the MCP tools need, and no command's help does.
SERVING = {"fastapi", "starlette", "uvicorn", "psycopg", "mcp", "httpx"}


def imported(store: Path, *args: str, then: tuple[tuple[str, ...], ...] = ()) -> list[str]:
    """The heavy packages that `slotline --store STORE ARGS…` imports (and the commands
    `then`, run after it in the same interpreter)."""
    runs = [json.dumps(["--store", str(store), *command]) for command in (args, *then)]
    probe = f"import json\nHEAVY = {HEAVY!r}\n{PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", probe, *runs], capture_output=True, text=True, check=True
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr
    return list(result["loaded"])


@pytest.mark.parametrize(
    "args",
    [
        ("status", "--json"),
        ("ls", "--json"),
        ("limits", "--json"),
    ],
)
def test_json_reads_do_not_import_rich(tmp_path: Path, args: tuple[str, ...]) -> None:
    assert "rich" not in imported(tmp_path / "s.db", *args)


def test_status_imports_neither_pydantic_nor_asyncio(tmp_path: Path) -> None:
    loaded = imported(tmp_path / "s.db", "status")
    assert "rich" in loaded  # the table people read
    assert not {"pydantic", "asyncio", "httpx", "psutil", "yaml"} & set(loaded)
    # nor what only a schedule's tick, a back-off rule's pattern or a reset's zone needs
    assert not {"cronsim", "re2", "zoneinfo"} & set(loaded)


def test_submit_receipt_does_not_import_rich(tmp_path: Path) -> None:
    assert "rich" not in imported(tmp_path / "s.db", "submit", "--", "true")


def test_help_imports_none_of_the_commands(tmp_path: Path) -> None:
    # `slotline --help` lists every command from its one-line summary, loading none
    assert imported(tmp_path / "s.db", "--help") == []


def test_the_help_of_every_command_imports_no_server_driver_or_mcp(tmp_path: Path) -> None:
    helps = tuple((name, "--help") for name in COMMANDS)
    loaded = imported(tmp_path / "s.db", "--version", then=helps)
    assert not SERVING & set(loaded)


# Runs `slotline ARGS…` (a `serve`) in this interpreter; when the node's first claim
# returns, notes the heavy packages imported so far and stops the node with SIGTERM.
SERVE_PROBE = """
import json, os, signal, sys
from slotline.cli import main
from slotline.store.sqlite import SQLiteStore

at_first_claim = []
claim = SQLiteStore.claim


def noted(self, *args, **kwargs):
    result = claim(self, *args, **kwargs)
    if not at_first_claim:
        at_first_claim.append([m for m in HEAVY if m in sys.modules])
        os.kill(os.getpid(), signal.SIGTERM)
    return result


SQLiteStore.claim = noted
code = None
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
at_exit = [m for m in HEAVY if m in sys.modules]
print(json.dumps({"code": code, "first": at_first_claim, "exit": at_exit}))
"""


def serve_imports(tmp_path: Path, *args: str) -> tuple[list[str], list[str]]:
    """The heavy packages `slotline serve ARGS…` had imported when its first claim
    returned, and when it exited."""
    probe = f"HEAVY = {HEAVY!r}\n{SERVE_PROBE}"
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),  # not the user's slotline.yaml
        "SLOTLINE_TOKENS": str(tmp_path / "tokens.json"),
    }
    argv = ["--store", str(tmp_path / "s.db"), "serve", "--node-id", "probe", *args]
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=120,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, done.stderr
    assert result["first"], done.stderr  # it claimed
    return list(result["first"][0]), list(result["exit"])


def test_serve_claims_before_it_imports_its_http_server(tmp_path: Path) -> None:
    # FastAPI, uvicorn and MCP take about a second to import: the first claim goes first
    at_first_claim, _ = serve_imports(tmp_path, "--port", "0")
    assert not SERVING & set(at_first_claim)


def test_serve_without_http_never_imports_the_server(tmp_path: Path) -> None:
    at_first_claim, at_exit = serve_imports(tmp_path, "--no-http")
    assert not SERVING & set(at_first_claim + at_exit)
