"""Needs input under `slotline serve`: an interactive run whose terminal goes quiet while
its process waits on it is marked as needing input (an event, `ls`, `status`, `show`,
their JSON), webhooks and command hooks hear `task.needs_input`, and the mark clears
when the terminal prints again. A run that computes without printing is not marked."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from receiver import Receiver
from slotline.models import Status
from slotline.runner.terminal_input import send_input
from slotline.runner.tmux import Terminal, socket_path
from slotline.store import Store, open_store
from waiting import until

AGENT = str(Path(__file__).parent.parent / "asking_agent.py")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as found:
        yield found


def setup(tmp_path: Path, receiver: Receiver, **agent: Any) -> tuple[Path, dict[str, str]]:
    config = tmp_path / "slotline.yaml"
    command = [sys.executable, *agent.pop("argv", [AGENT, "{prompt}"])]
    heard = tmp_path / "heard"
    config.write_text(
        yaml.safe_dump(
            {
                "agents": {
                    "asker": {"command": command, "interactive": True, "idle_after": "1s", **agent}
                },
                "notify": [{"url": receiver.url, "events": ["task.needs_input"]}],
                "on_event": {"task.needs_input": ["touch", str(heard)]},
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOTLINE_")}
    env.update(XDG_DATA_HOME=str(tmp_path / "xdg"), SLOTLINE_STORE=str(tmp_path / "s.db"))
    return config, env


@pytest.fixture
def node_tmux(tmp_path: Path) -> Iterator[None]:
    yield
    socket = socket_path(tmp_path / "logs")
    subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, check=False)


def serve(config: Path, env: dict[str, str], tmp_path: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "slotline", "serve", "--no-http", "--config", str(config)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path,
    )  # fmt: skip


def cli(env: dict[str, str], tmp_path: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "slotline", *args],
        env={**env, "COLUMNS": "200"}, cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout


def kinds(store: Store, task_id: str) -> list[str]:
    return [e.kind for e in store.task_events(task_id)]


def stop(node: subprocess.Popen[bytes]) -> None:
    node.send_signal(signal.SIGTERM)
    node.wait(timeout=60)


def test_a_run_waiting_on_its_terminal_needs_input_until_it_prints(
    tmp_path: Path, receiver: Receiver, node_tmux: None
) -> None:
    config, env = setup(tmp_path, receiver, argv=[AGENT, "{prompt}", "--times", "2"])
    store = open_store(env["SLOTLINE_STORE"])
    node = serve(config, env, tmp_path)
    try:
        cli(env, tmp_path, "submit", "--agent", "asker", "--prompt", "Deploy? [y/n] ")
        task = until(lambda: store.list_tasks(Status.RUNNING), 60, "the run")[0]
        # Its question printed, its terminal quiet for idle_after: it needs input,
        marked = until(lambda: store.get(task.id).needs_input_at, 60, "the needs-input mark")
        assert kinds(store, task.id).count("needs_input") == 1
        assert "running NEEDS INPUT" in cli(env, tmp_path, "ls")
        assert "NEEDS INPUT" in cli(env, tmp_path, "status")
        assert "NEEDS INPUT since" in cli(env, tmp_path, "show", task.id)
        assert '"needs_input_at": "' in cli(env, tmp_path, "show", "--json", task.id)
        # and the webhook and the command hook hear it, once.
        until(lambda: receiver.received, 60, "the webhook")
        (delivery,) = receiver.received
        body = delivery.json()
        assert body["event"] == "task.needs_input"
        assert body["task"]["id"] == task.id
        assert body["task"]["needs_input_at"] is not None
        until((tmp_path / "heard").exists, 60, "the command hook")
        assert store.get(task.id).needs_input_at == marked

        # Answered, it prints again: the mark clears; it asks again, and is marked again.
        send_input(store.get(task.id), "y")
        until(lambda: "output_resumed" in kinds(store, task.id), 60, "the mark cleared")
        until(lambda: kinds(store, task.id).count("needs_input") == 2, 60, "a second mark")
        send_input(store.get(task.id), "y")
        ended = until(lambda: store.get(task.id).status.terminal and store.get(task.id), 60)
        assert ended.status is Status.SUCCEEDED
        assert ended.needs_input_at is None
    finally:
        stop(node)
        store.close()


def test_a_run_busy_without_printing_is_not_waiting(
    tmp_path: Path, receiver: Receiver, node_tmux: None
) -> None:
    # A run that computes for a while without printing (a loop on one core), then asks.
    busy = (
        "import time\n"
        "end = time.monotonic() + 4\n"
        "while time.monotonic() < end: pass\n"
        "print('done computing', flush=True)\n"
        "input('Proceed? ')\n"
    )
    config, env = setup(tmp_path, receiver, argv=["-c", busy, "{prompt}"])
    store = open_store(env["SLOTLINE_STORE"])
    node = serve(config, env, tmp_path)
    try:
        cli(env, tmp_path, "submit", "--agent", "asker", "--prompt", "go")
        task = until(lambda: store.list_tasks(Status.RUNNING), 60, "the run")[0]
        until(lambda: "done computing" in (Path(log_of(store, task.id)).read_text()), 60)
        # Its 4 quiet seconds of work did not count as waiting; its question does.
        until(lambda: store.get(task.id).needs_input_at, 60, "the needs-input mark")
        events = store.task_events(task.id)
        started = next(e.at for e in events if e.kind == "started")
        needs = next(e.at for e in events if e.kind == "needs_input")
        assert needs - started >= 4.0
        send_input(store.get(task.id), "")
        until(lambda: store.get(task.id).status.terminal, 60)
    finally:
        stop(node)
        store.close()


def log_of(store: Store, task_id: str) -> str:
    attempts = store.get(task_id).attempts
    return attempts[-1].log_path or os.devnull if attempts else os.devnull


def test_a_run_that_needs_input_gives_its_slot_back_and_takes_it_again(
    tmp_path: Path, receiver: Receiver, node_tmux: None
) -> None:
    # One slot; runs of `asker` give theirs back while they need input.
    config, env = setup(tmp_path, receiver, release_while_idle=True)
    store = open_store(env["SLOTLINE_STORE"])
    store.set_setting("max_concurrent", 1)
    node = serve(config, env, tmp_path)
    try:
        cli(env, tmp_path, "submit", "--agent", "asker", "--prompt", "Deploy? ")
        asker = until(lambda: store.list_tasks(Status.RUNNING), 60, "the asker")[0]
        go = tmp_path / "go"
        waiter = store.submit({"command": [sys.executable, "-c", WAIT_FOR_FILE, str(go)]})
        # Its question unanswered, it gives its slot back: the other task starts beside it.
        until(lambda: store.get(waiter.id).status is Status.RUNNING, 60, "the second start")
        released = store.get(asker.id)
        assert released.status is Status.RUNNING
        assert released.slot_released is not None
        assert released.needs_input_at is not None
        assert store.status().active == 1
        assert "NEEDS INPUT" in cli(env, tmp_path, "ls")

        # Typed while no slot is free: refused, and nothing reaches the run, not even
        # keys typed into its terminal behind slotline's back.
        refused = subprocess.run(
            [sys.executable, "-m", "slotline", "send", asker.id, "y"],
            env=env, cwd=tmp_path, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert refused.returncode == 1
        assert "gave its slot back while it waited for input and cannot take one again now" in (
            refused.stderr
        )
        assert "the 1 slot is taken" in refused.stderr
        terminal = Terminal.of(released.attempts[-1].log_path)
        assert terminal is not None
        keys = terminal.tmux("send-keys", "-t", terminal.pane_target, "sneaky", "Enter")
        subprocess.run(keys, check=True)
        # Once the slot frees, the answer takes it again first, then reaches the run.
        go.touch()
        until(lambda: store.get(waiter.id).status.terminal, 60, "the second's end")
        send_input(store.get(asker.id), "y", store=store)
        assert "slot_retaken" in kinds(store, asker.id)
        ended = until(lambda: store.get(asker.id).status.terminal and store.get(asker.id), 60)
        assert ended.status is Status.SUCCEEDED
        log = Path(ended.attempts[-1].log_path or "").read_bytes()
        assert b"sneaky" not in log
        assert b"asking_agent got 'y'" in log
    finally:
        stop(node)
        store.close()


WAIT_FOR_FILE = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"


def test_a_run_someone_is_attached_to_keeps_its_slot(
    tmp_path: Path, receiver: Receiver, node_tmux: None
) -> None:
    # Someone attached, who may type, is reading its question: keys are not dropped under
    # them, the run keeps its slot (it still needs input).
    config, env = setup(tmp_path, receiver, release_while_idle=True)
    store = open_store(env["SLOTLINE_STORE"])
    node = serve(config, env, tmp_path)
    outer = str(tmp_path / "outer.sock")
    try:
        cli(env, tmp_path, "submit", "--agent", "asker", "--prompt", "Deploy? ")
        task = until(lambda: store.list_tasks(Status.RUNNING), 60, "the run")[0]
        terminal = until(lambda: Terminal.of(log_of(store, task.id)), 60, "its terminal")
        attach = shlex.join(terminal.attach_argv())
        subprocess.run(
            ["tmux", "-S", outer, "-f", os.devnull, "new-session", "-d", "-x", "100", attach],
            check=True, env={k: v for k, v in env.items() if k != "TMUX"},
        )  # fmt: skip
        until(lambda: terminal.writers() == 1, 60, "the attached client")
        until(lambda: store.get(task.id).needs_input_at, 60, "the needs-input mark")
        assert store.get(task.id).slot_released is None
        assert store.status().active == 1
        send_input(store.get(task.id), "y", store=store)
        until(lambda: store.get(task.id).status.terminal, 60)
    finally:
        subprocess.run(["tmux", "-S", outer, "kill-server"], capture_output=True, check=False)
        stop(node)
        store.close()
