"""`slotline agents check`: can each agent type of slotline.yaml run here?"""

from __future__ import annotations

import click

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.numbers import seconds
from slotline.cli.plain import print_json, printable
from slotline.runner.preflight import PROBE_TIMEOUT, Level, check_agents


@click.group("agents")
def agents() -> None:
    """The agent types of slotline.yaml (`agents:`)."""


@agents.command("check")
@click.argument("name", metavar="[TYPE]", required=False)
@click.option(
    "--timeout", type=seconds(0.1, 600), default=PROBE_TIMEOUT,
    show_default=True, help="Seconds each dry run may take.",
)  # fmt: skip
@json_option
@pass_state
def check(state: CliState, name: str | None, timeout: float) -> int:
    """Check each agent type (or TYPE): its binary is on the PATH, the variables its
    `env_required` names are set (only whether, never their values), and a dry run (its
    `probe`, else `BINARY --version`) succeeds with the environment a run would get.

    One line per check, OK, WARN or FAIL with the reason; exits 1 when any check FAILs.
    """
    config = state.config
    chosen = {name: config.agent(name)} if name is not None else config.agents
    findings = check_agents(chosen, config.env_allow, timeout=timeout)
    failed = any(finding.level is Level.FAIL for finding in findings)
    if state.json:
        print_json({"ok": not failed, "checks": [finding.to_dict() for finding in findings]})
        return 1 if failed else 0
    if not findings:
        click.echo(f"no agent types in {config.source or 'the configuration (no file found)'}")
    for finding in findings:
        click.echo(
            f"{printable(finding.agent):<12} {finding.level:<4}  {finding.check:<6} "
            f"{printable(finding.detail)}"
        )
    return 1 if failed else 0
