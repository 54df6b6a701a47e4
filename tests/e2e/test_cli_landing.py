"""Review and land a run's work through the CLI, on a store and through a server (HTTP):
two fake agents append to the same file in their own worktrees; both are diffed, the
first merges, the second is refused on the conflict naming the file and changes
nothing; `worktrees` lists them and `worktrees prune` applies the policy."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from gitrepos import agent_command, agent_script, branches, make_repo, show, worktree_paths
from gitrepos import run as git_in
from waiting import until

from .conftest import Run, Start, ok


def _finished(cli: Run, task_id: str, *args: str) -> dict[str, Any] | None:
    task = ok(cli(*args, "--json", "show", task_id))
    tree = task["attempts"][0]["worktree"] if task["attempts"] else None
    return task if tree and tree["state"] != "active" and task["finished_at"] else None


def test_two_agents_diffed_and_merged_the_second_refused_on_conflict(
    run: Run, serve_http: Start, tmp_path: Path
) -> None:
    # Given two agents that each append a line to notes.txt in their own worktree,
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    script = agent_script(tmp_path)
    # The node prunes on its own too (its periodic sweep): not during this test, whose
    # prunes are the CLI's and the server's (on a slow machine it once came first).
    url = serve_http("--sweep-interval", "0")
    remote = ("--url", url)
    ids = []
    for name in ("alpha", "beta"):
        command = agent_command(script, name, "notes.txt")
        submitted = run(
            *remote, "--json", "submit", "--worktree", "--repo", str(repo),
            "--keep", "until_merged", "--", *command,
        )  # fmt: skip
        ids.append(ok(submitted)["id"])
    alpha, beta = (until(lambda i=i: _finished(run, i, *remote), what="run ended") for i in ids)
    assert alpha["status"] == beta["status"] == "succeeded"
    assert alpha["attempts"][0]["worktree"]["state"] == "kept"  # until_merged

    # When each is diffed (through the server, and on the store),
    patch = ok(run(*remote, "--json", "diff", ids[0]))
    assert patch["stat"] == {"files": 2, "insertions": 2, "deletions": 0}
    assert "+written by alpha" in patch["text"]
    assert patch["source"] == "worktree"
    assert patch["truncated"] is False
    plain = run("diff", ids[1])
    assert plain.code == 0, plain.err
    assert "+written by beta" in plain.out
    assert "2 files changed, +2 -0" in plain.out.splitlines()[0]
    stat = ok(run("--json", "diff", "--stat", ids[1]))
    assert stat["text"] == ""

    def run_git(*args: str) -> str:
        return git_in(repo, *args)

    # Then merging into main is refused while main is the user's checkout with an
    # uncommitted change, naming the file, changing nothing;
    (repo / "notes.txt").write_text("base\nthe user's own edit\n")
    main_before = run(*remote, "merge", ids[0])
    assert main_before.code == 1
    refusal = main_before.error_line()
    assert f"branch main is checked out in {repo}, which has uncommitted changes" in refusal
    assert "in notes.txt; nothing was changed" in refusal
    assert (repo / "notes.txt").read_text() == "base\nthe user's own edit\n"
    run_git("checkout", "--", "notes.txt")
    # and once the user works on another branch, the first merges into main (through
    # the server), without touching the user's checkout,
    run_git("checkout", "-q", "-b", "work")
    (repo / "scratch.txt").write_text("the user's own uncommitted file\n")
    merged = ok(run(*remote, "--json", "merge", ids[0]))
    assert merged["into"] == "main"
    assert merged["already"] is False
    assert show(repo, "main", "notes.txt") == "base\nwritten by alpha"
    assert run_git("rev-parse", "main") == merged["commit"]
    shown = ok(run("--json", "show", ids[0]))
    assert shown["attempts"][0]["worktree"]["merged"]["into"] == "main"
    assert "merged into main" in run("show", ids[0]).out
    events = ok(run("--json", "events"))
    kinds = [(e["kind"], e["task_id"]) for e in events]
    assert ("merged", ids[0]) in kinds

    # and the second is refused on the conflict, naming the file, changing nothing.
    main_tip = run_git("rev-parse", "main")
    trees = worktree_paths(repo)
    refused = run("merge", ids[1])
    assert refused.code == 1
    assert "conflicts with the target in notes.txt" in refused.error_line()
    assert run_git("rev-parse", "main") == main_tip
    assert worktree_paths(repo) == trees  # the temporary worktree is gone
    assert run_git("symbolic-ref", "--short", "HEAD") == "work"
    assert run_git("status", "--porcelain") == "?? scratch.txt"
    assert (repo / "notes.txt").read_text() == "base\n"
    over_http = run(*remote, "--json", "merge", ids[1])
    assert over_http.code == 1
    assert '"type": "MergeConflict"' in over_http.err
    assert "merged" not in [
        e["kind"] for e in ok(run("--json", "events")) if e["task_id"] == ids[1]
    ]

    # `worktrees` lists both; a prune removes the merged one (until_merged) and keeps
    # the other, whose branch holds commits merged nowhere.
    listed = ok(run(*remote, "--json", "worktrees"))
    assert [(w["task_id"], w["state"], w["keep"]) for w in listed] == [
        (ids[0], "kept", "until_merged"), (ids[1], "kept", "until_merged"),
    ]  # fmt: skip
    assert all(w["size"] > 0 for w in listed)
    assert "until_merged" in run("worktrees").out
    dry = ok(run(*remote, "--json", "worktrees", "prune", "--dry-run"))
    assert [(p["task_id"], p["reason"]) for p in dry["pruned"]] == [(ids[0], "merged")]
    assert len(ok(run("--json", "worktrees"))) == 2  # a dry run changes nothing
    pruned = ok(run("--json", "worktrees", "prune"))
    assert [(p["task_id"], p["branch_fate"]) for p in pruned["pruned"]] == [(ids[0], "deleted")]
    assert [w["task_id"] for w in ok(run("--json", "worktrees"))] == [ids[1]]
    assert alpha["attempts"][0]["worktree"]["branch"] not in branches(repo)
    assert beta["attempts"][0]["worktree"]["branch"] in branches(repo)


def test_merge_lands_work_left_uncommitted_and_refuses_a_task_without_a_worktree(
    run: Run, serve_http: Start, tmp_path: Path
) -> None:
    # Given a run that leaves its change uncommitted (as agents in print mode do),
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    git_in(repo, "branch", "integration")
    edit = "open('notes.txt', 'a').write('left uncommitted\\n')"
    url = serve_http()
    task = ok(run("--url", url, "--json", "submit", "--worktree", "--repo", str(repo),
                  "--", sys.executable, "-c", edit))  # fmt: skip
    ended = until(lambda: _finished(run, task["id"]), what="run ended")
    branch = ended["attempts"][0]["worktree"]["branch"]
    # Then its diff shows the uncommitted change,
    assert "+left uncommitted" in ok(run("--json", "diff", task["id"]))["text"]
    # a merge into the checked-out main, which has a change of its own, is refused
    # before anything is committed,
    (repo / "notes.txt").write_text("base\nthe user's\n")
    refused = run("merge", task["id"])
    assert refused.code == 1
    assert "which has uncommitted changes in notes.txt" in refused.error_line()
    assert git_in(repo, "rev-parse", branch) == ended["attempts"][0]["worktree"]["base_commit"]
    # and a merge elsewhere lands it: slotline commits it on the run's branch, saying so.
    merged = ok(run("--json", "merge", task["id"], "--into", "integration"))
    assert merged["already"] is False
    assert show(repo, "integration", "notes.txt") == "base\nleft uncommitted"
    author = git_in(repo, "log", "-1", "--format=%an <%ae>|%s", branch)
    subject = f"slotline: uncommitted work of task {task['id'][:8]} (attempt 1)"
    assert author == f"slotline <slotline@localhost>|{subject}"
    assert ok(run("--json", "diff", task["id"]))["stat"]["insertions"] == 1  # the same work
    plain = ok(run("--json", "submit", "--", sys.executable, "-c", "pass"))
    no_tree = run("diff", plain["id"])
    assert no_tree.code == 1
    assert "does not run in a worktree" in no_tree.error_line()


def test_the_diff_of_a_run_that_changed_nothing_is_empty(
    run: Run, serve_http: Start, tmp_path: Path
) -> None:
    # Given a worktree run that changes nothing (its worktree and its empty branch go
    # when it ends),
    repo = make_repo(tmp_path / "repo", {"notes.txt": "base\n"})
    url = serve_http()
    task = ok(run("--url", url, "--json", "submit", "--worktree", "--repo", str(repo),
                  "--", sys.executable, "-c", "pass"))  # fmt: skip
    ended = until(lambda: _finished(run, task["id"]), what="run ended")
    assert ended["attempts"][0]["worktree"]["branch"] not in branches(repo)
    # then its diff says so, as the stat recorded when it ended: no error.
    diff = ok(run("--json", "diff", task["id"]))
    assert (diff["source"], diff["stat"]["files"], diff["text"]) == ("recorded", 0, "")
    plain = run("diff", task["id"])
    assert plain.code == 0, plain.err
    assert "0 files changed, +0 -0" in plain.out
