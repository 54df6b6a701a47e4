"""`git` run as an argv list, never a shell: its environment, its timeout, its errors."""

from __future__ import annotations

import os
import subprocess

# A git command that takes longer than this is taken as hung.
GIT_TIMEOUT = 300.0


class GitFailed(Exception):
    """A git command failed; the message is git's own last line of error."""


def git_env() -> dict[str, str]:
    """The environment git runs with: none of the caller's GIT_* variables (a GIT_DIR or
    GIT_INDEX_FILE would point it elsewhere), no prompt, messages in English."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    return env


def git(where: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run `git -C where ARGS…` (an argv list, never a shell); its stdout, stripped.

    Raises:
        GitFailed: git is missing, timed out or exited non-zero (its error message).
    """
    try:
        done = subprocess.run(
            ["git", "-C", where, *args],
            capture_output=True,
            text=True,
            env=env or git_env(),
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise GitFailed("git is not installed (or not on PATH)") from None
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {args[0]} took longer than {GIT_TIMEOUT:g}s") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
        raise GitFailed(lines[-1] if lines else f"git {args[0]} exited {done.returncode}")
    return done.stdout.strip()


def commit_of(repo: str, ref: str) -> str:
    """The commit id `ref` names in `repo`.

    Raises:
        GitFailed: `ref` names no commit there.
    """
    return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")


def branch_tip(repo: str, branch: str) -> str | None:
    """The commit `refs/heads/BRANCH` points at in `repo`, or None."""
    # show-ref matches the ref by name only: revision syntax (`main~2`, `main@{1}`) in
    # `branch` names no ref, where rev-parse would resolve it to a commit.
    try:
        return git(repo, "show-ref", "--verify", "--hash", f"refs/heads/{branch}") or None
    except GitFailed:
        return None
