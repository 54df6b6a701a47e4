"""The node's files are its user's alone: logs, pid and exit files, the wake-up folder."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotline.errors import StoreError
from slotline.node.node import Node
from slotline.spec import TaskSpec
from slotline.store import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(tmp_path / "store.db")
    yield s
    s.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_logs_pid_and_exit_files_are_0600_in_0700_folders(store: Store, tmp_path: Path) -> None:
    # Given a command and a callable that fails (its traceback goes to its log),
    def boom() -> None:
        raise RuntimeError("boom")

    command = store.submit({"command": ["sh", "-c", "echo hi"]})
    function = store.submit({"callable": "boom"})
    logs = tmp_path / "logs"
    node = Node(store, log_dir=logs, callables={"boom": boom})
    # when a node with a permissive umask runs them,
    old = os.umask(0o022)
    try:
        asyncio.run(node.run_until_idle(timeout=60))
    finally:
        os.umask(old)
    # then every file they left is readable by this user only, in folders only it can open.
    attempt = store.get(command.id).attempts[0]
    log = Path(attempt.log_path or "")
    files = [log, log.with_suffix(".pid"), log.with_suffix(".exit"), logs / function.id / "1.log"]
    for path in files:
        assert path.exists(), path
        assert mode(path) == 0o600, path
        assert mode(path.parent) == 0o700, path.parent
    assert mode(logs) == 0o700
    assert "boom" in (logs / function.id / "1.log").read_text()


@pytest.fixture
def temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp dir of this test's own, as TMPDIR would set it (short: socket paths are)."""
    folder = Path(tempfile.mkdtemp(prefix="slt-"))
    folder.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    shutil.rmtree(folder)


def test_the_wake_up_folder_is_private_even_if_it_existed_loose(temp_dir: Path) -> None:
    # Given this user's wake-up folder, made world-writable beforehand,
    root = temp_dir / f"slotline-{os.getuid()}"
    root.mkdir()
    root.chmod(0o777)
    # when a watcher opens,
    store = open_store(temp_dir / "store.db")
    watcher = store.watcher()
    try:
        # then the folder is 0700 again and the store's folder inside it too.
        assert mode(root) == 0o700
        inner = list(root.iterdir())
        assert len(inner) == 1
        assert mode(inner[0]) == 0o700
    finally:
        watcher.close()
        store.close()


def test_a_wake_up_folder_that_is_a_symlink_is_refused(temp_dir: Path) -> None:
    # Given a symlink where this user's wake-up folder goes (someone else's trap),
    elsewhere = temp_dir / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (temp_dir / f"slotline-{os.getuid()}").symlink_to(elsewhere)
    # then opening a watcher refuses with a clear error and puts nothing there.
    with (
        open_store(temp_dir / "store.db") as store,
        pytest.raises(StoreError, match="was not made by this user"),
    ):
        store.watcher()
    assert list(elsewhere.iterdir()) == []


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a folder of another user")
def test_a_wake_up_folder_of_another_user_is_refused(temp_dir: Path) -> None:
    # Given this user's wake-up folder name, taken by another user,
    root = temp_dir / f"slotline-{os.getuid()}"
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    # then opening a watcher refuses with a clear error.
    with (
        open_store(temp_dir / "store.db") as store,
        pytest.raises(StoreError, match="was not made by this user"),
    ):
        store.watcher()


def test_a_long_temp_dir_still_gives_working_wake_ups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a temp dir whose path alone nearly fills a Unix socket path,
    long = tmp_path / ("t" * 90)
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    # a watcher still opens, and a change through another store object wakes it.
    with open_store(tmp_path / "store.db") as store, open_store(tmp_path / "store.db") as other:
        watcher = store.watcher()
        try:
            other.submit(TaskSpec(command=["true"]))

            async def woken() -> bool:
                return await watcher.wait(30)

            assert asyncio.run(woken())
        finally:
            watcher.close()
