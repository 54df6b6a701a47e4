"""The runner's portable fallbacks, run directly on whatever platform runs the suite: each
Linux-only capability (`runner/capabilities.py`) has one, and these prove it works without
the capability; `SLOTLINE_PORTABLE=1` makes the whole node use them (a second CI pass)."""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from slotline.errors import InvalidInput
from slotline.runner.capabilities import (
    PORTABLE,
    PORTABLE_VARIABLE,
    Capabilities,
    exit_notice,
    memory_cap,
    open_fds,
    portable_requested,
    probe,
)
from slotline.runner.keepers import WRAP, KeeperServer
from slotline.runner.process import _process_state, spawn
from waiting import until

LINUX = sys.platform.startswith("linux")
KQUEUE = Capabilities(
    pidfd=False, kqueue_proc=True, proc_fs=False, rlimit_as=False, spawn_setsid=False
)


def caps_in_a_fresh_process(**environ: str) -> dict[str, bool]:
    code = (
        "import dataclasses, json;"
        "from slotline.runner.capabilities import CAPS;"
        "print(json.dumps(dataclasses.asdict(CAPS)))"
    )
    env = {**os.environ, **environ}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    caps: dict[str, bool] = json.loads(done.stdout)
    return caps


def test_the_portable_switch_turns_every_linux_only_capability_off() -> None:
    caps = caps_in_a_fresh_process(**{PORTABLE_VARIABLE: "1"})

    assert caps == dict.fromkeys(caps, False)
    assert probe(portable=True) == PORTABLE


@pytest.mark.skipif(not LINUX, reason="the Linux capabilities")
def test_without_the_switch_linux_offers_its_capabilities() -> None:
    caps = caps_in_a_fresh_process(**{PORTABLE_VARIABLE: "0"})

    assert caps == {
        "pidfd": True,
        "kqueue_proc": False,
        "proc_fs": True,
        "rlimit_as": True,
        "spawn_setsid": True,
    }


def test_an_unclear_value_of_the_switch_is_refused_with_what_to_give() -> None:
    assert portable_requested({PORTABLE_VARIABLE: "Yes"}) is True
    assert portable_requested({}) is False
    with pytest.raises(InvalidInput, match=r"SLOTLINE_PORTABLE='maybe': give 1 .* or 0"):
        portable_requested({PORTABLE_VARIABLE: "maybe"})


def run_under_a_keeper(tmp_path: Path, caps: Capabilities, *argv: str) -> int:
    """Start `argv` under a keeper and wait for it with `caps`; its exit code."""

    async def scenario() -> int:
        handle = await spawn(list(argv), None, dict(os.environ), tmp_path / "1.log")
        outcome = await asyncio.wait_for(handle.wait(caps), 30)
        assert not handle.alive(caps)
        assert outcome.exit_code is not None
        return outcome.exit_code

    return asyncio.run(scenario())


def test_without_pidfd_or_kqueue_the_exit_is_found_by_polling(tmp_path: Path) -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert exit_notice(child.pid, PORTABLE) is None, "nothing to wait on: poll"
    finally:
        child.kill()
        child.wait()

    code = run_under_a_keeper(tmp_path, PORTABLE, "sh", "-c", "sleep 0.3; exit 7")

    assert code == 7


@pytest.mark.skipif(not hasattr(select, "kqueue"), reason="kqueue: macOS and the BSDs")
def test_with_kqueue_the_exit_is_noticed_by_evfilt_proc(tmp_path: Path) -> None:
    child = subprocess.Popen(["sleep", "30"])
    notice = exit_notice(child.pid, KQUEUE)
    assert notice is not None
    try:
        assert select.select([notice], [], [], 0)[0] == [], "not readable while it runs"
        child.kill()
        child.wait()
        assert select.select([notice], [], [], 10)[0] == [notice]
    finally:
        notice.close()

    assert run_under_a_keeper(tmp_path, KQUEUE, "sh", "-c", "sleep 0.3; exit 7") == 7


def test_without_proc_psutil_gives_the_start_time_and_tells_a_zombie(tmp_path: Path) -> None:
    child = subprocess.Popen(["sh", "-c", "read line"], stdin=subprocess.PIPE)
    try:
        found = _process_state(child.pid, PORTABLE)
        assert found is not None
        started, zombie = found
        assert abs(started - psutil.Process(child.pid).create_time()) < 1.0
        assert not zombie
        assert child.stdin is not None
        child.stdin.close()  # it ends, and stays a zombie until waited for
        until(lambda: (state := _process_state(child.pid, PORTABLE)) and state[1], what="zombie")
        if LINUX:  # the same answer as the one read from /proc
            assert _process_state(child.pid, probe()) == (pytest.approx(started, abs=1.0), True)
    finally:
        child.wait()
    assert _process_state(child.pid, PORTABLE) is None


def test_without_proc_the_open_descriptors_are_listed_from_dev_fd() -> None:
    kept, closed = os.pipe()
    os.close(closed)
    try:
        fds = open_fds(PORTABLE)
    finally:
        os.close(kept)

    assert {0, 1, 2, kept} <= set(fds)
    assert closed not in fds, "a closed descriptor is left out (posix_spawn may refuse it)"


def test_without_setsid_in_posix_spawn_the_keeper_server_leads_its_own_group(
    tmp_path: Path,
) -> None:
    server = KeeperServer((sys.executable, "-I", "-S", WRAP, "--serve"), caps=PORTABLE)
    try:
        exit_path = tmp_path / "1.exit"
        keeper = [str(exit_path), "0", "", "1000000", "", "--", "sh", "-c", "exit 3"]
        pid = server.start_keeper(keeper, dict(os.environ), tmp_path / "1.log")
        until(exit_path.exists, what="the exit file")
        assert exit_path.read_text() == "3\n"
        assert pid != server._pid
        server_pid = server._pid
        assert server_pid is not None
        # Out of the node's process group (a Ctrl-C there does not reach it), in its session.
        assert os.getpgid(server_pid) == server_pid
        assert os.getsid(server_pid) == os.getsid(0)
    finally:
        server.close()


def test_where_no_memory_cap_can_be_enforced_the_run_log_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "1.log"
    enforced = Capabilities(
        pidfd=False, kqueue_proc=False, proc_fs=False, rlimit_as=True, spawn_setsid=False
    )
    assert memory_cap(512, log, enforced) == 512
    assert memory_cap(None, log, PORTABLE) == 0
    assert not log.exists(), "nothing to say"

    assert memory_cap(512, log, PORTABLE) == 0

    assert log.read_text() == (
        f"[slotline: memory cap of 512 MB not enforced: this platform ({sys.platform}) "
        "has no enforced RLIMIT_AS]\n"
    )
    assert oct(log.stat().st_mode & 0o777) == oct(0o600)
    assert "memory cap of 512 MB not enforced" in caplog.text
