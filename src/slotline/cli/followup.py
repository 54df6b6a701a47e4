"""`slotline followup TASK --prompt …`: a new task that continues TASK's agent session."""

from __future__ import annotations

import functools

import click

from slotline.cli.context import CliState, json_option, pass_state, report_warning
from slotline.cli.plain import print_json, short_id
from slotline.client.followup import submit_followup
from slotline.store.readback import read_back


@click.command()
@click.argument("task_id", metavar="TASK")
@click.option("--prompt", "-p", required=True, help="What the agent does next.")
@json_option
@pass_state
def followup(state: CliState, task_id: str, prompt: str) -> None:
    """Queue a follow-up of TASK: it runs once TASK succeeded, in TASK's worktree and
    agent session, through the agent type's `resume` template with PROMPT. Once TASK's
    branch was merged, in a new worktree of its own from the commit it was merged as.

    Refused at once when TASK's agent type has no `resume` template, or TASK has ended
    without a session id; a follow-up that starts and finds no session fails, naming why.
    """
    warn = functools.partial(report_warning, as_json=state.json)
    task = submit_followup(state.store, state.config, task_id, prompt, warn)
    fresh = read_back(state.store.get, task)
    if state.json:
        print_json(fresh.to_dict())
    else:
        click.echo(
            f"follow-up {short_id(fresh.id)} of {short_id(task_id)}: {fresh.status.value}; "
            "it resumes the session once the task it follows has succeeded"
        )
