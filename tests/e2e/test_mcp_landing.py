"""A supervising agent reviews and lands its coding agents' work through MCP: the diff of
each worktree run, the first merged, the second refused on the conflict naming the file;
over stdio on the store, over stdio through a server, and over HTTP (`/mcp`)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from gitrepos import agent_command, agent_script, make_repo, show
from gitrepos import run as git_in
from waiting import until

from .conftest import Run, Serve, Start, ok
from .test_mcp import call, error_text


def two_runs(run: Run, repo: Path, tmp_path: Path, *remote: str) -> list[str]:
    """Two fake agents that append to notes.txt, each in its own worktree, both ended."""
    script = agent_script(tmp_path)
    ids = []
    for name in ("alpha", "beta"):
        argv = agent_command(script, name, "notes.txt")
        submitted = run(*remote, "--json", "submit", "--worktree", "--repo", str(repo), "--", *argv)
        ids.append(ok(submitted)["id"])
    for task_id in ids:
        until(
            lambda t=task_id: ok(run(*remote, "--json", "show", t))["status"] == "succeeded",
            what="the run succeeded",
        )
    return ids


async def review_and_land(session: ClientSession, repo: Path, ids: list[str]) -> None:
    """What the supervisor does, and what it must see."""
    alpha, beta = ids
    tools = {t.name for t in (await session.list_tools()).tools}
    assert {"task_diff", "merge_task"} <= tools
    # It reads the diff of each run, or only its stat,
    patch = await call(session, "task_diff", task_id=alpha[:8])
    assert patch["stat"] == {"files": 2, "insertions": 2, "deletions": 0}
    assert "+written by alpha" in patch["text"]
    stat = await call(session, "task_diff", task_id=beta, stat_only=True)
    assert (stat["stat"]["files"], stat["text"]) == (2, "")
    # is told plainly that the checkout of the branch its runs started from has changes
    # of its own,
    busy = error_text(await session.call_tool("merge_task", {"task_id": alpha}))
    assert f"branch main is checked out in {repo}, which has uncommitted changes" in busy
    # lands the first on a branch of its own,
    merged = await call(session, "merge_task", task_id=alpha, into="integration")
    assert (merged["into"], merged["already"]) == ("integration", False)
    assert show(repo, "integration", "notes.txt") == "base\nwritten by alpha"
    # and the second is refused on the conflict, naming the file, changing nothing.
    tip = git_in(repo, "rev-parse", "integration")
    conflict = error_text(
        await session.call_tool("merge_task", {"task_id": beta, "into": "integration"})
    )
    assert "conflicts with the target in notes.txt" in conflict
    assert git_in(repo, "rev-parse", "integration") == tip


def a_repo(tmp_path: Path) -> Path:
    """A repository whose user's checkout (main) holds an edit not committed yet."""
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    git_in(repo, "branch", "integration")
    (repo / "notes.txt").write_text("base\nthe user's own edit\n")
    return repo


def test_over_stdio_on_the_store(
    cli: Run, serve: Serve, base_env: dict[str, str], tmp_path: Path
) -> None:
    repo = a_repo(tmp_path)
    serve()
    ids = two_runs(cli, repo, tmp_path)
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "slotline", "mcp"], env=base_env, cwd=str(tmp_path)
    )

    async def main() -> None:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await review_and_land(session, repo, ids)

    anyio.run(main)


def test_over_stdio_through_a_server_and_over_http(
    run: Run, serve_http: Start, base_env: dict[str, str], tmp_path: Path
) -> None:
    repo = a_repo(tmp_path)
    url = serve_http()
    admin = ok(run("--json", "token", "create", "--role", "admin", "--name", "root"))["token"]
    remote = ("--url", url, "--token", admin)
    stdio_ids = two_runs(run, repo, tmp_path, *remote)
    git_in(repo, "branch", "-f", "integration", "main")
    http_ids = two_runs(run, repo, tmp_path, *remote)
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "slotline", *remote, "mcp"],
        env=base_env,
        cwd=str(tmp_path),
    )

    async def main() -> None:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await review_and_land(session, repo, stdio_ids)
        git_in(repo, "branch", "-f", "integration", "main")
        headers = {"Authorization": f"Bearer {admin}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await review_and_land(session, repo, http_ids)

    anyio.run(main)
