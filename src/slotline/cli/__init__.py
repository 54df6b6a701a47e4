"""The `slotline` command line: the group, its commands, and one-line errors with exit codes.

Exit codes: 0 done, 1 slotline refused (a SlotlineError: unknown id, illegal state…),
2 bad usage (unknown option, malformed value), 75 full (a queue or spawn bound refused a
submit: try again later, as the message says), 130 interrupted.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from click.core import ParameterSource

from slotline import __version__
from slotline.cli.context import CliState, report_error
from slotline.errors import AccessDenied, BoundExceeded, SlotlineError

# Each command: where it lives ("module:function"), imported only when the command runs, and
# the line `slotline --help` lists it with (its short help), so that neither the help nor
# `slotline status` pays for the other commands' imports (FastAPI, the store, mcp…).
COMMANDS = {
    "serve": ("serve:serve", "Run a node until Ctrl-C or SIGTERM."),
    "mcp": ("mcp:mcp_command", "Serve the MCP tools on stdin/stdout (docs/mcp.md)."),
    "submit": ("submit:submit", "Queue a command, or a prompt for an agent type."),
    "show": ("views:show_task", "Show one task in full, with its attempts."),
    "ls": ("views:list_tasks", "List tasks, oldest first, a page at a time."),
    "status": ("views:queue_status_command", "Show capacity, running tasks and the line."),
    "events": ("views:events", "Show the event log."),
    "logs": ("logs:logs", "Print the output of a task's run."),
    "attach": ("terminal:attach", "Attach this terminal to an interactive task's run."),
    "send": ("terminal:send", "Type a line into an interactive task's run."),
    "stats": ("stats:stats", "Show counts, wait and run times, throughput and spending."),
    "top": ("top:top", "A live view: utilization, running agents, the line."),
    "export": ("export:export", "Write the whole queue state as JSON."),
    "cancel": ("steering:cancel", "Cancel a task."),
    "terminate": ("steering:terminate", "Stop a running task; it fails."),
    "followup": ("followup:followup", "Queue a follow-up of a task, in its worktree and session."),
    "boost": ("steering:boost", "Start next: put a task at position 1."),
    "bump": ("steering:bump", "Start now, even over the limits."),
    "move": ("steering:move", "Move a queued task in line."),
    "priority": ("steering:priority", "Set the priority of a task not yet started."),
    "restart": ("steering:restart", "Run an ended or blocked task again."),
    "hold": ("steering:hold", "Keep a queued task from starting until released."),
    "release": ("steering:release", "Put a held task back in line, at its old place."),
    "pause": ("steering:pause", "Stop starting tasks; running ones go on."),
    "resume": ("steering:resume", "Start tasks again after a pause."),
    "clear": ("steering:clear", "Cancel every task not yet started (needs --force)."),
    "bulk": ("bulk:bulk", "Apply one verb to many tasks, by id or by filter."),
    "stop": ("bulk:stop", "Emergency stop: pause, and terminate every running task."),
    "redrive": ("redrive:redrive", "Restart failed tasks that match every given filter."),
    "limits": ("limits:limits", "Show or change the limits."),
    "config": ("config:show_config", "Print the effective configuration."),
    "token": ("tokens:token", "Create, list and revoke the API tokens of a server."),
    "schedule": ("schedule:schedule", "Recurring tasks, submitted at each tick of a cron."),
    "diff": ("landing:diff", "Show what the task's latest worktree run changed."),
    "merge": ("landing:merge", "Merge the branch of the task's latest run into a branch."),
    "worktrees": ("landing:worktrees", "List the worktrees of runs on disk."),
    "notify": ("webhooks:notify", "Webhooks (`notify:` in slotline.yaml) and command hooks."),
    "agents": ("agents:agents", "The agent types of slotline.yaml (`agents:`)."),
}


class LazyGroup(click.Group):
    """A group whose commands (`COMMANDS`) are imported when first asked for; its help
    lists them from their short help in `COMMANDS`, importing none."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*COMMANDS, *(n for n in super().list_commands(ctx) if n not in COMMANDS)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is not None or cmd_name not in COMMANDS:
            return found
        where, short_help = COMMANDS[cmd_name]
        module, name = where.split(":")
        command = getattr(importlib.import_module(f"slotline.cli.{module}"), name)
        assert isinstance(command, click.Command)
        command.short_help = short_help
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (
                name,
                COMMANDS[name][1] if name in COMMANDS else self.commands[name].get_short_help_str(),
            )
            for name in self.list_commands(ctx)
            if name in COMMANDS or not self.commands[name].hidden
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


EXIT_REFUSED = 1
EXIT_FULL = 75  # EX_TEMPFAIL: a bound refused a submit; try again later
EXIT_INTERRUPTED = 130


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--store",
    "store_url",
    metavar="URL",
    envvar="SLOTLINE_STORE",
    help="A file path, sqlite:///PATH or postgresql://… "
    "(default: $SLOTLINE_STORE, else the SQLite file under the XDG data dir).",
)
@click.option(
    "--url",
    metavar="URL",
    envvar="SLOTLINE_URL",
    help="Work through the slotline server at URL (http://HOST:PORT) instead of a store "
    "(default: $SLOTLINE_URL).",
)
@click.option(
    "--token",
    metavar="TOKEN",
    envvar="SLOTLINE_TOKEN",
    help="The API token for --url (default: $SLOTLINE_TOKEN).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON; errors as JSON on stderr.")
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="slotline.yaml (default: $SLOTLINE_CONFIG, else slotline.yaml here or in the nearest "
    "folder above, else $XDG_CONFIG_HOME/slotline/slotline.yaml, else none).",
)
@click.version_option(__version__, "--version", "-V", prog_name="slotline")
@click.pass_context
def cli(
    ctx: click.Context,
    store_url: str | None,
    url: str | None,
    token: str | None,
    as_json: bool,
    config_path: Path | None,
) -> None:
    """slotline: run many agents or long commands, at most N at once, and steer the line."""
    state = ctx.ensure_object(CliState)
    state.store_url, state.url = choose_target(ctx, store_url or None, url or None)
    if token and state.url is None and _given(ctx, "token"):
        raise click.UsageError("--token is for a server: give --url (or $SLOTLINE_URL) too")
    state.token = token or None
    state.json = state.json or as_json
    state.config_path = config_path
    ctx.call_on_close(state.close)


def _given(ctx: click.Context, name: str) -> bool:
    """Whether the option was typed on the command line (not taken from the environment)."""
    return ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE


def choose_target(
    ctx: click.Context, store_url: str | None, url: str | None
) -> tuple[str | None, str | None]:
    """(store, url): one of them. A flag beats an environment variable; two flags, or two
    variables, are a usage error."""
    if store_url is None or url is None:
        return store_url, url
    store_typed, url_typed = _given(ctx, "store_url"), _given(ctx, "url")
    if store_typed and url_typed:
        raise click.UsageError("give --store or --url, not both")
    if store_typed:
        return store_url, None
    if url_typed:
        return None, url
    raise click.UsageError(
        "SLOTLINE_STORE and SLOTLINE_URL are both set: unset one, or pick with --store or --url"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of `slotline`: run the command, turn every error into one line and an
    exit code (never a traceback unless SLOTLINE_DEBUG is set)."""
    args = list(sys.argv[1:] if argv is None else argv)
    state = CliState()
    code = 0
    try:
        result = cli.main(args=args, prog_name="slotline", standalone_mode=False, obj=state)
        code = result if isinstance(result, int) else 0
    except click.UsageError as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            # `slotline` alone: the help, as click shows it (click >= 8.2 raises this).
            click.echo(exc.ctx.get_help(), err=True)
        else:
            report_error(_usage_message(exc), type(exc).__name__, _json_mode(state, args))
        code = exc.exit_code
    except click.ClickException as exc:
        report_error(exc.format_message(), type(exc).__name__, _json_mode(state, args))
        code = exc.exit_code
    except BoundExceeded as exc:
        report_error(full_message(exc), type(exc).__name__, _json_mode(state, args))
        code = EXIT_FULL
    except SlotlineError as exc:
        message = str(exc)
        if isinstance(exc, AccessDenied) and state.token is None:
            message += " (give one with --token or $SLOTLINE_TOKEN)"
        report_error(message, type(exc).__name__, _json_mode(state, args))
        code = EXIT_REFUSED
    except click.Abort:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`slotline ls | head`): nothing left to say to it.
        _silence_stdout()
        code = EXIT_REFUSED
    except Exception as exc:
        if os.environ.get("SLOTLINE_DEBUG"):
            raise
        message = f"unexpected {type(exc).__name__}: {exc} (set SLOTLINE_DEBUG=1 for a traceback)"
        report_error(message, type(exc).__name__, _json_mode(state, args))
        code = EXIT_REFUSED
    sys.exit(code)


def full_message(exc: BoundExceeded) -> str:
    """A bound's refusal, with when to try again (from the ETAs) when waiting can help."""
    if exc.details.get("limit") == "max_depth":
        return f"{exc}; waiting will not help: submit from a shallower task"
    hint = exc.details.get("retry_after")
    when = "later" if hint is None else f"in ~{max(1, round(float(hint)))}s"
    return f"{exc}; try again {when}, or submit with --wait-for-room"


def _usage_message(exc: click.UsageError) -> str:
    message = exc.format_message()
    if exc.ctx is not None:
        message += f" (see '{exc.ctx.command_path} --help')"
    return message


def _json_mode(state: CliState, args: list[str]) -> bool:
    """JSON errors when --json was given, even if parsing stopped before it was read."""
    if state.json:
        return True
    before_command = args[: args.index("--")] if "--" in args else args
    return "--json" in before_command


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


__all__ = ["cli", "main"]
