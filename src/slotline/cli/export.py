"""`slotline export`: the whole queue state as one JSON document, for debugging."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import click

from slotline import __version__
from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.plain import print_json, strict_json
from slotline.client.backend import Backend
from slotline.clock import iso, utcnow
from slotline.config.file import redact_url
from slotline.models import Status

ALL_TASKS = 1_000_000_000
# Reads are separate transactions; retry when a change lands between the first and last.
SNAPSHOT_TRIES = 5


def snapshot(store: Backend) -> dict[str, Any]:
    """Tasks with attempts, settings and limits, counts, the line and the last event seq.

    The reads are retried until no event was committed while they ran, so the parts
    agree with each other (unless the store keeps changing, then the last try is kept).
    """
    for _ in range(SNAPSHOT_TRIES):
        seq = store.last_seq()
        tasks = store.list_tasks(limit=ALL_TASKS)
        settings = store.settings()
        status = store.status(all=True)
        if store.last_seq() == seq:
            break
    counts = dict.fromkeys((s.value for s in Status), 0)
    for task in tasks:
        counts[task.status.value] += 1
    line = status.to_dict()
    line["running"] = [t.id for t in status.running]
    line["queued"] = [t.id for t in status.queued]
    return {
        "slotline_version": __version__,
        "exported_at": iso(utcnow()),
        "store": redact_url(store.url),
        "last_seq": seq,
        "settings": settings.to_dict(),
        "counts": counts,
        "status": line,
        "tasks": [t.to_dict() for t in tasks],
    }


@click.command()
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to FILE (replaced atomically) instead of stdout.",
)
@json_option
@pass_state
def export(state: CliState, output: Path | None) -> None:
    """Write the whole queue state as JSON.

    Every task with its attempts, the settings and limits, counts per state, the line
    in order, and the last event's sequence number (to resume `events --since` from).
    The task environments are left out, as they may hold secrets.
    """
    data = snapshot(state.store)
    if output is None:
        print_json(data)
        return
    _write_atomically(output, strict_json(data, indent=2) + "\n")
    if state.json:
        print_json(
            {"output": str(output), "tasks": len(data["tasks"]), "last_seq": data["last_seq"]}
        )
    else:
        click.echo(
            f"exported {len(data['tasks'])} tasks (events up to {data['last_seq']}) to {output}"
        )


def _write_atomically(path: Path, text: str) -> None:
    path = path.expanduser()
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise click.FileError(str(path), hint=exc.strerror or str(exc)) from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
