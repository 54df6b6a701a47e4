"""docs/cli.md matches the code: every command of `slotline` and every one of its flags is
documented in that command's section (global flags in "Global options")."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

from slotline.cli import cli

DOC = Path(__file__).parents[2] / "docs" / "cli.md"


def sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of each `##` and `###` section."""
    parts = re.split(r"^(#{2,3} .*)$", text, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def section_of(name: str, found: list[tuple[str, str]]) -> str | None:
    """The section documenting command `name` (e.g. "limits set"): the one whose heading
    names it in backticks, else the first with a table row for it, else the first whose
    body shows `slotline NAME …`."""
    for heading, body in found:
        if re.search(rf"`{re.escape(name)}(`| )", heading):
            return heading + body
    for heading, body in found:
        if re.search(rf"^\| `{re.escape(name)}(`| )", body, flags=re.MULTILINE):
            return heading + body
    for heading, body in found:
        if re.search(rf"slotline {re.escape(name)}\b", body):
            return heading + body
    return None


def commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        yield prefix + name, command
        if isinstance(command, click.Group):
            yield from commands(command, f"{prefix}{name} ")


def flags(command: click.Command) -> list[str]:
    """Its long flags; `--json` after a command's name is the global one (see there)."""
    return [
        flag
        for param in command.params
        if isinstance(param, click.Option)
        for flag in (*param.opts, *param.secondary_opts)
        if flag.startswith("--") and flag not in ("--help", "--json")
    ]


def test_every_command_and_flag_is_in_docs_cli_md() -> None:
    text = DOC.read_text()
    found = sections(text)
    missing = []
    global_options = next((h + b for h, b in found if "Global options" in h), "")
    missing += [f"slotline {flag}" for flag in flags(cli) if flag not in global_options]
    for name, command in commands(cli):
        section = section_of(name, found)
        if section is None:
            missing.append(f"slotline {name} (no section)")
            continue
        missing += [f"slotline {name} {flag}" for flag in flags(command) if flag not in section]
    assert not missing, "not in docs/cli.md:\n" + "\n".join(missing)


def test_the_doc_check_finds_an_undocumented_flag() -> None:
    undocumented = click.Command("serve", params=[click.Option(["--made-up-flag"])])
    section = section_of("serve", sections(DOC.read_text())) or ""
    assert [f for f in flags(undocumented) if f not in section] == ["--made-up-flag"]
