"""Past a run's log cap: the exit-code keeper (a real one, `wrap.py`) keeps the last of
the output it drops in `N.tail`, rewritten as the command prints; the usage reader reads
the final result from it, and the stall watch takes its rewrites for output."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from slotline.node.run import Run
from slotline.node.stall import StallWatch
from slotline.node.supervisor import Supervisor
from slotline.pacing.usage import UsageConfig, read_log
from slotline.runner import wrap
from slotline.runner.process import ProcessHandle
from slotline.store import open_store
from slotline.webhooks.config import StallRule
from waiting import until

CAP = 1000
CHATTER = r"""
import json, os, sys, time
def wait(name):
    while not os.path.exists(name):
        time.sleep(0.02)
print("x" * 5000, flush=True)
print("first burst over", flush=True)
wait("a")
print("second burst", flush=True)
wait("b")
result = {"type": "result", "total_cost_usd": 0.42, "session_id": "sess-cap"}
print(json.dumps(result), flush=True)
"""


def test_output_past_the_cap_shows_in_the_tail_and_its_final_result_is_read(
    tmp_path: Path,
) -> None:
    # Given a command that prints far past its log's cap, in bursts,
    log = tmp_path / "1.log"
    keeper = [sys.executable, "-I", "-S", wrap.__file__, str(tmp_path / "1.exit"), "0",
              str(tmp_path), str(CAP), "", "--", sys.executable, "-c", CHATTER]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(keeper, stdout=out, stderr=out)
    tail = log.with_suffix(".tail")
    try:
        # the keeper rewrites the tail with each burst, while the log stays at its cap,
        until(lambda: tail.exists() and b"first burst over" in tail.read_bytes(), 30, "tail")
        first = tail.stat().st_mtime_ns
        capped = log.stat().st_size
        (tmp_path / "a").touch()
        until(lambda: b"second burst" in tail.read_bytes(), 30, "the second burst")
        assert tail.stat().st_mtime_ns != first
        assert log.stat().st_size == capped
        (tmp_path / "b").touch()
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    # and the result printed last is read, past the cap.
    assert len(tail.read_bytes()) <= wrap.TAIL
    rules = UsageConfig.model_validate(
        {"json": {"cost_usd": "total_cost_usd", "session_id": "session_id"}}
    )
    reading = read_log(rules, log)
    assert reading.session_id == "sess-cap"
    assert reading.usage is not None
    assert reading.usage.cost_usd == 0.42
    assert json.loads(tail.read_text().splitlines()[-1])["session_id"] == "sess-cap"


def test_a_run_that_prints_past_its_cap_is_not_stalled(tmp_path: Path) -> None:
    # Given a run whose log is at its cap (its size no longer changes) and a quiet rule,
    store = open_store(str(tmp_path / "store.db"))
    store.submit({"command": ["true"], "agent": "coder"})
    claim = store.claim("node-a").claims[0]
    log = tmp_path / "1.log"
    log.write_bytes(b"x" * CAP)
    run = Run(claim.task, claim.attempt, handle=ProcessHandle(1, None, log, tmp_path / "1.exit"))
    supervisor = SimpleNamespace(runs={run.attempt.id: run}, store=store, changed=asyncio.Event())
    now = [0.0]
    rule = StallRule(after=10, pattern="waiting for input$")
    watch = StallWatch(cast(Supervisor, supervisor), {"coder": rule}, clock=lambda: now[0])
    tail = log.with_suffix(".tail")

    def stalled() -> bool:
        return store.get(run.task.id).stalled_at is not None

    def rewrite(text: str) -> None:
        """As the keeper does: new content, a new mtime (set: a coarse clock could
        give two quick writes the same one)."""
        tail.write_text(text)
        stamp = (len(text) + now[0]) * 1_000_000_000
        os.utime(tail, ns=(int(stamp), int(stamp)))

    async def rounds() -> None:
        await watch.check()
        # when the keeper rewrites the tail of what it drops (the run still prints),
        for n in range(3):
            now[0] += 6
            rewrite(f"line {n}\n")
            await watch.check()
            assert not stalled()  # output past the cap is output
        # then once its last line is the waiting prompt, that counts too,
        now[0] += 1
        rewrite("more\nAllow this edit? waiting for input")
        await watch.check()
        assert stalled()
        # and a quiet run past its cap is still seen as quiet.
        rewrite("back to work\n")
        await watch.check()
        assert not stalled()
        now[0] += 11
        await watch.check()
        assert stalled()

    try:
        asyncio.run(rounds())
    finally:
        store.close()


def test_a_tail_that_cannot_be_written_never_costs_the_exit_status(tmp_path: Path) -> None:
    # Given a run past its cap whose tail file cannot be written (a folder is in its place),
    (tmp_path / "1.tail").mkdir()
    chatter = "import sys; print('x' * 5000, flush=True); sys.exit(7)"
    keeper = [sys.executable, "-I", "-S", wrap.__file__, str(tmp_path / "1.exit"), "0",
              str(tmp_path), str(CAP), "", "--", sys.executable, "-c", chatter]  # fmt: skip
    with (tmp_path / "1.log").open("ab") as out:
        ended = subprocess.run(keeper, stdout=out, stderr=out, timeout=60, check=False)
    # then the keeper still ends well and records the command's exit status,
    assert ended.returncode == 0
    assert (tmp_path / "1.exit").read_text() == "7\n"
    # and leaves no temporary file behind.
    assert not (tmp_path / "1.tail.tmp").exists()


# Prints exactly the cap in one write, and more once told to (after the keeper has read
# the first write: one read that ends at the cap).
AT_THE_CAP = f"""
import os, sys, time
sys.stdout.write("y" * {CAP}); sys.stdout.flush()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.02)
sys.stdout.write("z" * 10); sys.stdout.flush()
"""


def test_the_cap_is_marked_when_a_read_ends_exactly_at_it(tmp_path: Path) -> None:
    # Given a command whose first output fills the log's cap to the byte, in one read,
    log = tmp_path / "1.log"
    more = tmp_path / "more"
    command = [sys.executable, "-c", AT_THE_CAP, str(more)]
    keeper = [sys.executable, "-I", "-S", wrap.__file__, str(tmp_path / "1.exit"), "0",
              str(tmp_path), str(CAP), "", "--", *command]  # fmt: skip
    with log.open("ab") as out:
        process = subprocess.Popen(keeper, stdout=out, stderr=out)
    try:
        until(lambda: log.stat().st_size >= CAP, 30, "the first write in the log")
        # when it prints past the cap,
        more.touch()
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
    # then the log says where it was cut, and how much was dropped.
    text = log.read_text()
    assert text.startswith("y" * CAP + f"\n[slotline: log cap of {CAP} bytes reached")
    assert text.endswith("[slotline: 10 bytes of output dropped]\n")
