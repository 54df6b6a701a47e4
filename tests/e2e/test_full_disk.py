"""A full disk under a node's logs (a real one: a small tmpfs): a run that filled it is
still recorded as it ended, a run whose keeper could not write at all goes back in line
uncounted while starts wait for room, and `/readyz` says why while the disk is full."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from slotline.models import Status
from slotline.runner import wrap
from slotline.store import Store
from waiting import until

from .conftest import Start

# Writes into the disk until it is full, then succeeds.
FILL = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
try:
    while True:
        os.write(fd, b"x" * 4096)
except OSError:
    pass
"""
NO_SPACE = "no space left on device: the exit status could not be written"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs: a disk that really fills (needs root, as CI and the dev machines
    have; elsewhere the test is skipped, saying so)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        why = f"cannot mount a small tmpfs for a real full disk: {mounted.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "--lazy", str(where)], check=False)


def ready(url: str) -> httpx.Response:
    return httpx.get(f"{url}/readyz", timeout=30)


@pytest.mark.timeout(300)
def test_a_full_disk_neither_fails_a_run_nor_hides_from_readyz(
    serve_http: Start, store: Store, small_disk: Path
) -> None:
    # Given a node whose logs are on a small disk,
    url = serve_http("--log-dir", str(small_disk), "--lease", "3")
    assert ready(url).status_code == 200
    filler = small_disk / "filler"
    # when a run fills that disk and then succeeds,
    filled = store.submit({"command": [sys.executable, "-c", FILL, str(filler)]})
    done = until(lambda: store.get(filled.id).status.terminal, 120, "the filling run's end")
    # then it is recorded as it ended (its keeper wrote the status in the room it kept),
    task = store.get(filled.id)
    assert (task.status, task.failure_reason) == (Status.SUCCEEDED, None), done
    assert task.attempts[-1].exit_code == 0
    # and `/readyz` says the node cannot write while the disk is full.
    answer = ready(url)
    assert answer.status_code == 503
    assert answer.json()["status"] == "unavailable"
    assert answer.json()["reason"] == f"no space left on device: {small_disk} cannot be written"

    # When a run starts on the full disk (its keeper cannot write a byte),
    later = store.submit({"command": ["true"], "max_attempts": 1})
    requeued = until(
        lambda: [e for e in store.events(0, 10_000) if e.kind == "requeued"],
        120,
        "the run put back in line",
    )
    # then it goes back in line, its disk named, and no further start is tried while
    # the disk is full;
    assert requeued[0].data["reason"] == NO_SPACE
    waiting = store.get(later.id)
    assert waiting.status is Status.QUEUED
    assert (waiting.attempts[-1].outcome, waiting.attempts[-1].reason) == ("interrupted", NO_SPACE)
    assert ready(url).status_code == 503
    # once there is room again, it runs and succeeds: the lost attempt was not counted
    # (it may try once), and `/readyz` is ready again.
    filler.unlink()
    until(lambda: store.get(later.id).status.terminal, 120, "the requeued run's end")
    ended = store.get(later.id)
    assert ended.status is Status.SUCCEEDED
    assert len(ended.attempts) == 2
    assert ready(url).status_code == 200


# Takes away the keeper's reserved room, fills the disk (the room too), says so outside
# the disk, and succeeds.
FILL_ALL = (
    """
import os, sys
if os.path.exists(sys.argv[2]):
    os.unlink(sys.argv[2])
"""
    + FILL
    + """
open(sys.argv[3], "w").close()
"""
)


def test_a_keeper_without_room_keeps_the_status_until_it_can_write_it(
    small_disk: Path, tmp_path: Path
) -> None:
    # Given a keeper whose command fills the disk and removes the room kept for the status,
    exit_file = small_disk / "1.exit"
    filler, said = small_disk / "filler", tmp_path / "filled"
    command = [sys.executable, "-c", FILL_ALL, str(filler), f"{exit_file}.reserved", str(said)]
    keeper = [sys.executable, "-I", "-S", wrap.__file__, str(exit_file), "0", str(tmp_path),
              "1000", "", "--", *command]  # fmt: skip
    with (small_disk / "1.log").open("ab") as out:
        process = subprocess.Popen(keeper, stdout=out, stderr=out)
    try:
        # when the command has ended on the full disk,
        until(said.exists, 60, "the command's end")
        # then the keeper writes no partial status and waits with it,
        assert process.poll() is None
        assert not exit_file.exists()
        assert not Path(f"{exit_file}.tmp").exists()
        # and writes it once there is room again.
        filler.unlink()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
    assert exit_file.read_text() == "0\n"
