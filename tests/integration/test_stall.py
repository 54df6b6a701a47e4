"""Stalled runs under `slotline serve`: a run of an agent type with a stall rule that
prints nothing for `stall_after`, or prints its waiting pattern, is marked stalled in the
store (every surface shows it) and, with `on_stall: terminate`, stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from slotline.config.file import load_config
from slotline.config.templates import expand_agent_type
from slotline.models import Status, Task
from slotline.store import Store, open_store
from waiting import until

AGENT = str(Path(__file__).parent.parent / "stalling_agent.py")


def setup(tmp_path: Path, **agent: Any) -> tuple[Path, dict[str, str]]:
    config = tmp_path / "slotline.yaml"
    command = [sys.executable, AGENT, "{prompt}", *agent.pop("args", [])]
    config.write_text(yaml.safe_dump({"agents": {"coder": {"command": command, **agent}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
    env.update(XDG_DATA_HOME=str(tmp_path / "xdg"), SLOTLINE_STORE=str(tmp_path / "s.db"))
    return config, env


def serve(config: Path, env: dict[str, str], tmp_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "slotline", "serve", "--no-http", "--config", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path,
    )  # fmt: skip


def submit(store: Store, config: Path, tmp_path: Path) -> tuple[Task, Path]:
    go = tmp_path / "go"
    fields = expand_agent_type(load_config(config), {"agent": "coder"}, str(go))
    return store.submit({**fields, "workspace": str(tmp_path)}), go


def cli(env: dict[str, str], tmp_path: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "slotline", *args],
        env={**env, "COLUMNS": "200"}, cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def kinds(store: Store, task: Task) -> list[str]:
    return [e.kind for e in store.task_events(task.id)]


def test_a_quiet_run_is_stalled_until_it_prints_again(tmp_path: Path) -> None:
    # Given an agent type whose runs count as stalled after 1s without output,
    config, env = setup(tmp_path, stall_after="1s")
    store = open_store(env["SLOTLINE_STORE"])
    node = serve(config, env, tmp_path)
    try:
        task, go = submit(store, config, tmp_path)
        # when its run prints a line and then nothing,
        stalled = until(lambda: store.get(task.id).stalled_at, 60, "the stall")
        # then it is marked stalled: in the events, in `ls`, `show` and their JSON,
        assert kinds(store, task).count("stalled") == 1
        assert store.get(task.id).status is Status.RUNNING
        assert "running STALLED" in cli(env, tmp_path, "ls")
        assert "STALLED since" in cli(env, tmp_path, "show", task.id)
        assert '"stalled_at": "' in cli(env, tmp_path, "show", "--json", task.id)
        # and once it prints again, it no longer is (and may stall anew later),
        go.touch()
        until(lambda: store.get(task.id).stalled_at is None, 60, "the run back")
        assert "unstalled" in kinds(store, task)
        until(lambda: kinds(store, task).count("stalled") == 2, 60, "a second quiet spell")
        assert store.get(task.id).stalled_at != stalled
        Path(f"{go}.end").touch()
        ended = until(lambda: store.get(task.id).finished_at and store.get(task.id), 60, "end")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=60)
    # a run that ends is not stalled, and it was not stopped for it.
    assert ended.status is Status.SUCCEEDED
    assert ended.stalled_at is None
    store.close()


def test_the_waiting_pattern_stalls_a_run_and_on_stall_terminate_stops_it(
    tmp_path: Path,
) -> None:
    # Given an agent type whose "waiting for input" prompt means stalled, terminated then,
    config, env = setup(
        tmp_path, args=["--ask"], stall_pattern=r"waiting for input$", on_stall="terminate"
    )
    store = open_store(env["SLOTLINE_STORE"])
    node = serve(config, env, tmp_path)
    try:
        task, _ = submit(store, config, tmp_path)
        # when its run prints that prompt (no quiet time is configured),
        ended = until(lambda: store.get(task.id).finished_at and store.get(task.id), 60, "end")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=60)
    # then it was marked stalled, and stopped with the reason.
    assert "stalled" in kinds(store, task)
    assert ended.status is Status.FAILED
    assert "stalled: printed its waiting-for-input pattern" in (ended.failure_reason or "")
    store.close()


def test_a_quiet_run_with_on_stall_terminate_is_stopped(tmp_path: Path) -> None:
    config, env = setup(tmp_path, stall_after=1, on_stall="terminate")
    store = open_store(env["SLOTLINE_STORE"])
    node = serve(config, env, tmp_path)
    try:
        task, _ = submit(store, config, tmp_path)
        ended = until(lambda: store.get(task.id).finished_at and store.get(task.id), 60, "end")
    finally:
        node.send_signal(signal.SIGTERM)
        node.wait(timeout=60)
    assert ended.status is Status.FAILED
    assert "stalled: printed nothing for 1s" in (ended.failure_reason or "")
    assert kinds(store, task).count("stalled") == 1
    store.close()
