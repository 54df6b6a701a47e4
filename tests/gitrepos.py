"""Real git repositories for the worktree tests: made in a folder, with one commit, an
author configured in the repository itself (fake agents commit through it), and a few
reads of what a branch or a checkout holds."""

from __future__ import annotations

import sys
from pathlib import Path

from slotline.worktrees.git import git

# A fake coding agent: appends its line to FILE (the same file for every agent), creates
# a file of its own, commits both; then, given a SIGNALS folder, says it got there
# (`NAME.started`) and waits for `go` in it before it ends, so that two runs are seen
# in flight together.
AGENT = """\
import os, pathlib, subprocess, sys, time
name, file, signals = sys.argv[1], sys.argv[2], sys.argv[3]
with open(file, "a") as out:
    out.write(f"written by {name}\\n")
pathlib.Path(f"{name}.txt").write_text(name + "\\n")
subprocess.run(["git", "add", "-A"], check=True)
subprocess.run(["git", "commit", "-q", "-m", f"work of {name}"], check=True)
if signals:
    pathlib.Path(signals, f"{name}.started").touch()
    while not os.path.exists(os.path.join(signals, "go")):
        time.sleep(0.02)
"""


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A repository at `path` on branch `main` with one commit of `files`."""
    path.mkdir(parents=True, exist_ok=True)
    run(path, "init", "-q", "-b", "main")
    run(path, "config", "user.name", "Test Agent")
    run(path, "config", "user.email", "agent@example.invalid")
    for name, text in (files or {"README.md": "hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    run(path, "add", "-A")
    run(path, "commit", "-q", "-m", "initial")
    return path


def run(path: Path, *args: str) -> str:
    return git(str(path), *args)


def commit_file(path: Path, name: str, text: str, message: str = "change") -> str:
    """Write and commit one file in a checkout; returns the new commit id."""
    (path / name).write_text(text)
    run(path, "add", name)
    run(path, "commit", "-q", "-m", message)
    return run(path, "rev-parse", "HEAD")


def show(repo: Path, ref: str, name: str) -> str:
    """The text of file `name` at `ref`."""
    return run(repo, "show", f"{ref}:{name}")


def branches(repo: Path) -> list[str]:
    return run(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()


def worktree_paths(repo: Path) -> list[str]:
    """The folders of the repository's worktrees, its own checkout first."""
    text = run(repo, "worktree", "list", "--porcelain")
    return [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("worktree ")]


def agent_script(folder: Path) -> Path:
    path = folder / "fake_agent.py"
    path.write_text(AGENT)
    return path


def agent_command(script: Path, name: str, file: str, signals: Path | None = None) -> list[str]:
    return [sys.executable, str(script), name, file, str(signals or "")]
