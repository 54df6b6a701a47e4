"""The parts of `slotline top` that need no terminal: key parsing and process sampling."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from slotline.cli.top import parse_keys
from slotline.runner.proctree import TreeSampler, size


def test_arrow_escape_sequences_and_plain_keys() -> None:
    assert parse_keys("\x1b[A\x1b[Bq") == ["up", "down", "q"]
    assert parse_keys("\x1bOAjk") == ["up", "down", "up"]  # application mode; vi keys
    assert parse_keys("cy") == ["c", "y"]
    assert parse_keys("\x1b") == ["\x1b"]


def test_a_tree_sums_its_children_and_a_gone_or_reused_pid_is_none() -> None:
    # Given a process with a child that burns CPU,
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'while True: pass'])"
    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        root = psutil.Process(parent.pid)
        deadline = time.monotonic() + 30
        while not root.children():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.01)
        sampler = TreeSampler()
        started = root.create_time()
        # then its tree is both processes, and the busy child shows in CPU%.
        usage = sampler.sample(parent.pid, started)
        assert usage is not None
        assert (usage.processes, usage.rss > 0) == (2, True)
        while usage.cpu_percent < 5:
            assert time.monotonic() < deadline, f"no CPU use seen: {usage}"
            time.sleep(0.05)
            usage = sampler.sample(parent.pid, started)
            assert usage is not None
        # A pid whose start time differs is another process: no figures.
        assert sampler.sample(parent.pid, started - 100) is None
    finally:
        for child in psutil.Process(parent.pid).children(recursive=True):
            child.kill()
        parent.kill()
        parent.wait()
    assert sampler.sample(parent.pid, started) is None
    assert sampler.sample(None) is None


def test_sizes_are_short() -> None:
    assert [size(n) for n in (512, 2048, 5 * 1024**2, 3 * 1024**3)] == [
        "512B",
        "2K",
        "5.0M",
        "3.0G",
    ]
