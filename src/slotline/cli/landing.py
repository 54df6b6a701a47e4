"""`slotline diff`, `merge` and `worktrees`: review and land a worktree run's work. On a
store git runs here; with --url the server runs it, where its repositories are."""

from __future__ import annotations

from typing import Any

import click

from slotline.cli.context import CliState, json_option, pass_state
from slotline.cli.plain import print_json
from slotline.client.wire import task_path
from slotline.clock import utcnow


@click.command("diff")
@click.argument("task_id", metavar="ID")
@click.option("--stat", "stat_only", is_flag=True, help="Only the diff stat, no patch.")
@json_option
@pass_state
def diff(state: CliState, task_id: str, stat_only: bool) -> None:
    """Show what the task's latest worktree run changed against the commit it started
    from: committed and uncommitted work in its worktree (or on its branch once the
    worktree is gone)."""
    remote = state.remote
    if remote is not None:
        params = {"stat": "true"} if stat_only else {}
        data = remote.call("GET", task_path(task_id, "diff"), params=params)
    else:
        from slotline.worktrees import verbs

        data = verbs.diff(state.local_store, task_id, stat_only).to_dict()
    if state.json:
        print_json(data)
        return
    stat = data["stat"]
    click.echo(
        f"{data['branch']} ({data['source']}) against {data['base_commit'][:12]}: "
        f"{stat['files']} file{'s' if stat['files'] != 1 else ''} changed, "
        f"+{stat['insertions']} -{stat['deletions']}"
    )
    if data["text"]:
        click.echo(data["text"], nl=False)
    if data["truncated"]:
        click.echo("… (truncated: the patch is longer than shown)", err=True)


@click.command("merge")
@click.argument("task_id", metavar="ID")
@click.option(
    "--into",
    metavar="BRANCH",
    help="The branch to merge into (default: the one the task started from).",
)
@click.option("--squash", is_flag=True, help="Squash the run's commits into one new commit.")
@json_option
@pass_state
def merge(state: CliState, task_id: str, into: str | None, squash: bool) -> None:
    """Merge the branch of the task's latest run into a branch: the merge is made in a
    temporary worktree, then the branch is moved only if it has not moved meanwhile; a
    checkout that has the branch (your main) moves with it, as `git merge` there, only
    when it is clean (through a server, only for an admin's token). A conflict or a
    dirty checkout is named and changes nothing."""
    remote = state.remote
    if remote is not None:
        body: dict[str, Any] = {"squash": squash}
        if into is not None:
            body["into"] = into
        data = remote.call("POST", task_path(task_id, "merge"), json=body)
        data.pop("task", None)
    else:
        from slotline.worktrees import verbs

        result, _ = verbs.merge(state.local_store, task_id, into, squash)
        data = result.to_dict()
    if state.json:
        print_json(data)
    elif data["already"]:
        click.echo(f"{data['branch']} is already in {data['into']} ({data['commit'][:12]})")
    else:
        how = "squashed into" if data["squash"] else "merged into"
        files = f" (and the files of {data['checkout']})" if data.get("checkout") else ""
        click.echo(
            f"{data['branch']} {how} {data['into']}: {data['old'][:12]} -> "
            f"{data['commit'][:12]}{files}"
        )


@click.group("worktrees", invoke_without_command=True)
@json_option
@pass_state
@click.pass_context
def worktrees(ctx: click.Context, state: CliState) -> None:
    """List the worktrees of runs on disk: task, branch, state, age and size (another
    machine's sharing the store: `remote`, without a size)."""
    if ctx.invoked_subcommand is not None:
        return
    remote = state.remote
    if remote is not None:
        found = remote.call("GET", "/api/worktrees")["worktrees"]
    else:
        from slotline.worktrees import verbs

        found = verbs.worktrees(state.local_store, utcnow())
    if state.json:
        print_json(found)
        return
    _table(found, ("TASK", "ATTEMPT", "BRANCH", "STATE", "KEEP", "AGE", "SIZE", "PATH"), None)


@worktrees.command("prune")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; remove nothing.")
@json_option
@pass_state
def prune(state: CliState, dry_run: bool) -> None:
    """Apply the worktree policy of slotline.yaml now to this machine's worktrees
    (`worktrees:` and each agent type's retain and max_disk, each task's keep): remove
    finished runs' worktree folders, oldest first, never a running one, committing what
    they left uncommitted on their branch; a branch with commits merged nowhere is kept
    (unless keep is never). Folders no run holds (after a crash) go too, unless they
    hold work."""
    remote = state.remote
    if remote is not None:
        found = remote.call("POST", "/api/worktrees/prune", json={"dry_run": dry_run})["pruned"]
    else:
        from slotline.worktrees import verbs

        policy = state.config.worktree_policy()
        found = verbs.prune(state.local_store, policy, utcnow(), dry_run)
    if state.json:
        print_json({"pruned": found, "dry_run": dry_run})
        return
    if not found:
        click.echo("nothing to prune")
        return
    header = ("TASK", "ATTEMPT", "BRANCH", "REASON", "FOLDER", "SIZE", "PATH")
    _table(found, header, "would prune" if dry_run else "pruned")


def _table(found: list[dict[str, Any]], header: tuple[str, ...], verb: str | None) -> None:
    if verb is not None:
        click.echo(f"{verb} {len(found)} worktree{'s' if len(found) != 1 else ''}:")
    rows = [header]
    for item in found:
        merged, branch, fate = item["merged"], item["branch"] or "-", item.get("branch_fate")
        folder = item.get("folder_fate", "")
        if item.get("saved_commit"):
            folder += f", work committed as {item['saved_commit'][:12]}"
        cells = {
            "TASK": (item["task_id"] or "-")[:8],
            "ATTEMPT": str(item["attempt"] or "-"),
            "BRANCH": branch if fate is None else f"{branch} ({fate})",
            "STATE": item["state"] + ("" if merged is None else f", merged into {merged['into']}"),
            "KEEP": item["keep"] or "-",
            "AGE": "-" if item["age"] is None else _age(item["age"]),
            "SIZE": "remote" if item["remote"] else _size(item["size"]),
            "REASON": item.get("reason", ""),
            "FOLDER": folder + (f" ({item['note']})" if item.get("note") else ""),
            "PATH": item["path"],
        }
        rows.append(tuple(cells[name] for name in header))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _size(size: int) -> str:
    for unit, scale in (("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if size >= scale:
            return f"{size / scale:.1f}{unit}"
    return f"{size}B"
