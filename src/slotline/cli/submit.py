"""`slotline submit`: put a command in line, as an argv list taken exactly as given."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import click

from slotline.bounds import ATTEMPTS, MEMORY_MB, SECONDS
from slotline.cli.context import CliState, json_option, pass_state, report_warning
from slotline.cli.numbers import Number
from slotline.cli.plain import describe_place, print_json, short_id
from slotline.cli.when import at_option
from slotline.client.backend import Backend, agent_type_fields
from slotline.clock import utcnow
from slotline.errors import BoundExceeded, InvalidInput
from slotline.models import Priority, Task
from slotline.store.readback import read_back

# How long to wait between tries for room when no estimate says (seconds), and at most.
ROOM_RETRY_DEFAULT = 5.0
ROOM_RETRY_MAX = 30.0

DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(_ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """A click callback: seconds, with an optional unit (`90`, `90s`, `10m`, `1.5h`, `1d`)."""
    if value is None:
        return None
    text = value.strip().lower()
    scale = DURATION_UNITS.get(text[-1:])
    try:
        seconds = float(text[:-1] if scale is not None else text) * (scale or 1.0)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a duration (seconds, or e.g. 90s, 10m, 2h)", param=param
        ) from None
    try:
        return SECONDS.parse(seconds)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param=param) from None


def parse_pairs(
    _ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> dict[str, str]:
    """A click callback: repeated `KEY=VALUE`, split at the first `=`, into a dict."""
    result: dict[str, str] = {}
    for text in values:
        key, sep, item = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise click.BadParameter(f"{text!r} is not KEY=VALUE", param=param)
        if key in result and result[key] != item:
            raise click.BadParameter(f"{key} is given twice", param=param)
        result[key] = item
    return result


def parse_priority(
    _ctx: click.Context, param: click.Parameter, value: str | None
) -> Priority | None:
    """A click callback: a priority name or alias, or a usage error naming the choices."""
    if value is None:
        return None
    try:
        return Priority.parse(value)
    except InvalidInput as exc:
        raise click.BadParameter(str(exc), param=param) from None


@click.command(context_settings={"allow_interspersed_args": False})
@click.option(
    "--priority",
    "-p",
    metavar="P",
    callback=parse_priority,
    help="urgent, high, normal (default) or low; P0..P3 and medium also work.",
)
@click.option("--title", "-t", metavar="T", help="A short name (default: the command line).")
@click.option(
    "--agent", "-a", metavar="A", help="Agent type, for per-agent limits (claude, aider…)."
)
@click.option(
    "--workspace",
    "-w",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Working directory of the run (default: the current directory).",
)
@click.option("--user", "-u", metavar="U", help="Who the task is for, for per-user limits.")
@click.option(
    "--label",
    "-l",
    "labels",
    metavar="K=V",
    callback=parse_pairs,
    multiple=True,
    help="A label, for per-label limits (repeatable).",
)
@click.option(
    "--env",
    "-e",
    "env",
    metavar="K=V",
    callback=parse_pairs,
    multiple=True,
    help="An environment variable for the run (repeatable).",
)
@click.option(
    "--after",
    "depends_on",
    metavar="ID",
    multiple=True,
    help="Start only after this task succeeded (repeatable).",
)
@click.option(
    "--parent",
    metavar="ID",
    envvar="SLOTLINE_TASK_ID",
    help="The task this one is a subtask of (default: $SLOTLINE_TASK_ID).",
)
@click.option(
    "--timeout",
    metavar="S",
    callback=parse_duration,
    help="Terminate a run that lasts longer (seconds, or 10m, 2h…).",
)
@click.option(
    "--ttl",
    metavar="S",
    callback=parse_duration,
    help="Expire the task if it has not started within this time.",
)
@click.option(
    "--max-attempts",
    metavar="N",
    type=Number(ATTEMPTS),
    help="Runs allowed in all; failures are retried with backoff (default 1, or the agent type's).",
)
@click.option(
    "--prompt",
    metavar="TEXT",
    help="With --agent NAME of slotline.yaml (or of a running node): the prompt, filled "
    "into the agent type's command as one argument (give no command then).",
)
@click.option(
    "--memory-mb",
    metavar="MB",
    type=Number(MEMORY_MB),
    help="Cap the run's memory (address space) at this many MiB.",
)
@click.option(
    "--expected-duration",
    metavar="S",
    callback=parse_duration,
    help="How long a run is expected to take (seconds, or 10m…), for ETAs; default: the "
    "recent run times of its agent type.",
)
@click.option(
    "--worktree",
    is_flag=True,
    help="Run in a new git worktree of the repository (--repo, default: the workspace), on "
    "a branch of its own, from --base (default: HEAD now).",
)
@click.option(
    "--repo",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="The git repository the task works on (for --worktree, and `repo` limits).",
)
@click.option("--base", metavar="REF", help="With --worktree: the branch or commit to start from.")
@click.option(
    "--keep",
    type=click.Choice(["on_failure", "always", "until_merged", "never"]),
    help="With --worktree: keep the worktree after the run: on_failure (default), always, "
    "until_merged or never. A branch with commits is always kept.",
)
@click.option(
    "--interactive",
    is_flag=True,
    default=None,
    help="Run in a terminal you can attach to (`slotline attach`) and type into "
    "(`slotline send`), instead of headless; an agent type may say so itself.",
)
@click.option("--hold", is_flag=True, help="Submit held: it does not start until released.")
@click.option(
    "--key",
    metavar="K",
    help="Idempotency key: while a task of the same user with this key has not finished, "
    "return that task instead of creating another.",
)
@click.option(
    "--dedup-window",
    metavar="S",
    callback=parse_duration,
    help="With --key: also return a task of that key that finished this long ago or less "
    "(seconds, or 10m, 2h…).",
)
@click.option(
    "--at",
    "run_at",
    metavar="TIME",
    callback=at_option,
    help="Start no earlier than TIME: HH:MM (next occurrence, local time), "
    "2026-11-24T15:00 (local) or 2026-11-24T15:00:00Z.",
)
@click.option(
    "--in",
    "delay",
    metavar="S",
    callback=parse_duration,
    help="Start no earlier than this long from now (seconds, or 10m, 2h…).",
)
@click.option(
    "--wait-for-room",
    is_flag=True,
    help="When the queue (or the parent's children) is full, wait for room and retry "
    "instead of failing with exit code 75.",
)
@click.option(
    "--room-timeout",
    metavar="S",
    callback=parse_duration,
    help="With --wait-for-room: give up after this long (exit code 75).",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Block until the task ends, with a live status line on stderr; exit with its "
    "exit code (1 if it ended without one). Ctrl-C stops waiting, not the task.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@json_option
@pass_state
def submit(
    state: CliState,
    priority: Priority | None,
    title: str | None,
    agent: str | None,
    workspace: Path | None,
    user: str | None,
    labels: dict[str, str],
    env: dict[str, str],
    depends_on: tuple[str, ...],
    parent: str | None,
    timeout: float | None,
    ttl: float | None,
    max_attempts: int | None,
    prompt: str | None,
    memory_mb: int | None,
    expected_duration: float | None,
    worktree: bool,
    repo: Path | None,
    base: str | None,
    keep: str | None,
    interactive: bool | None,
    hold: bool,
    key: str | None,
    dedup_window: float | None,
    run_at: float | None,
    delay: float | None,
    wait_for_room: bool,
    room_timeout: float | None,
    wait: bool,
    command: tuple[str, ...],
) -> int:
    """Queue a command: submit [OPTIONS] -- CMD ARGS…, or an agent type of slotline.yaml:
    submit --agent NAME --prompt TEXT.

    The command is an argv list, run without a shell. Prints the new task's id, status
    and position. With --wait, blocks until the task ends and exits with its exit code.
    """
    if not command and prompt is None and agent is None:
        raise click.UsageError("give the command after --, or --agent NAME --prompt TEXT")
    if run_at is not None and delay is not None:
        raise click.UsageError("give --at or --in, not both")
    if dedup_window is not None and key is None:
        raise click.UsageError("--dedup-window needs --key")
    spec: dict[str, Any] = {
        "command": list(command),
        "title": title,
        "agent": agent,
        "workspace": str((workspace or Path.cwd()).expanduser().resolve()),
        "user": user,
        "labels": labels,
        "env": env,
        "priority": Priority.NORMAL if priority is None else priority,
        "depends_on": list(depends_on),
        "parent_id": parent or None,
        "max_attempts": max_attempts,
        "timeout": timeout,
        "queue_ttl": ttl,
        "memory_mb": memory_mb,
        "expected_duration": expected_duration,
        "hold": hold,
        "key": key,
        "dedup_window": dedup_window,
        "run_at": run_at,
        "delay": delay,
        "isolation": "worktree" if worktree else None,
        "repo": None if repo is None else str(repo.expanduser().resolve()),
        "base": base,
        "keep": keep,
        "interactive": interactive or None,
    }
    if prompt is not None or (agent is not None and not command):
        warn = functools.partial(report_warning, as_json=state.json)
        spec = agent_type_fields(state.store, state.config, spec, prompt, warn)
    spec = {key: value for key, value in spec.items() if value is not None}
    if spec.get("memory_mb") and state.remote is None:
        from slotline.runner.capabilities import CAPS, unenforced_cap

        # Said now, not only in the run's log: a node on this machine cannot cap it
        # (through --url the node's platform is not known here; its run's log says so).
        if not CAPS.rlimit_as:
            report_warning(unenforced_cap(spec["memory_mb"], at_submit=True), state.json)
    store = state.store
    if wait_for_room:
        task = submit_when_room(store, spec, room_timeout, quiet=state.json)
    else:
        task = store.submit(spec)
    deduplicated = task.deduplicated
    if state.remote is None:  # a server answers the submit with the task as read back
        task = read_back(store.get, task)

    def announce() -> None:
        if not state.json:
            said = f"existing task (key {key!r})" if deduplicated else "submitted"
            click.echo(f"{said} {short_id(task.id)}: {describe_place(task, utcnow())}")
        elif not wait:  # with --wait, the JSON is the task as it ended
            print_json({**task.to_dict(), "deduplicated": deduplicated})

    if wait:
        from slotline.cli.wait import wait_for  # asyncio: only to wait

        return wait_for(store, task, state.json, announce)
    announce()
    return 0


def submit_when_room(
    store: Backend, spec: dict[str, Any], timeout: float | None, quiet: bool = False
) -> Task:
    """Submit, and while a bound refuses it, wait for room (the refusal's retry hint, or
    any change in the store, whichever comes first) and try again.

    Raises:
        BoundExceeded: still refused after `timeout` seconds, or a bound that waiting
            cannot lift (max_depth).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    said = False
    while True:
        try:
            return store.submit(spec)
        except BoundExceeded as exc:
            hint = exc.details.get("retry_after")
            left = None if deadline is None else deadline - time.monotonic()
            if exc.details.get("limit") == "max_depth" or (left is not None and left <= 0):
                raise
            if not quiet and not said:
                click.echo(f"waiting for room: {exc}", err=True)
                said = True
            delay = ROOM_RETRY_DEFAULT if hint is None else float(hint)
            delay = min(max(delay, 0.2), ROOM_RETRY_MAX, *(() if left is None else (left,)))
            from slotline.cli.interrupt import run_until_interrupted

            _, interrupted = run_until_interrupted(functools.partial(_changed, store, delay))
            if interrupted:
                raise click.Abort() from None


async def _changed(store: Backend, seconds: float) -> None:
    """Return when the store changes, or after `seconds`."""
    import asyncio

    watcher = await asyncio.to_thread(store.watcher)
    try:
        await watcher.wait(seconds)
    finally:
        watcher.close()
