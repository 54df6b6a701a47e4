"""The patch of a run is read from git with its stderr drained and a deadline: git
that warns a lot never blocks, git that hangs is stopped (with what it started)."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gitrepos import make_repo
from slotline.worktrees import diff
from slotline.worktrees.git import GitFailed, git_env


def _alias(tmp_path: Path, code: str) -> list[str]:
    """A git command (a shell alias) that runs Python `code`."""
    script = tmp_path / "alias.py"
    script.write_text(code)
    return ["-c", f"alias.noisy=!{sys.executable} {script}", "noisy"]


def _capped(repo: Path, args: list[str], **deadline: float) -> tuple[str, bool]:
    pool = ThreadPoolExecutor(1)  # a hang fails the test instead of blocking it
    try:
        return pool.submit(diff._capped, str(repo), args, git_env(), 1000, **deadline).result(20)
    finally:
        pool.shutdown(wait=False)


def test_git_writing_much_to_stderr_does_not_block(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    code = "import sys\nsys.stderr.write('warning: noisy\\n' * 20000)\nprint('patch')\n"
    assert _capped(repo, _alias(tmp_path, code)) == ("patch\n", False)


def test_a_failing_git_says_its_last_error_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    code = "import sys\nsys.stderr.write('warning: noisy\\n' * 20000 + 'fatal: bad\\n')\n"
    with pytest.raises(GitFailed, match="fatal: bad"):
        _capped(repo, _alias(tmp_path, code + "sys.exit(3)\n"))


def test_git_past_its_deadline_is_stopped(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    code = "import sys, time\nprint('start', flush=True)\ntime.sleep(120)\n"
    with pytest.raises(GitFailed, match=r"took longer than 0\.5s"):
        _capped(repo, _alias(tmp_path, code), deadline=0.5)
