"""Real `slotline serve` nodes on one PostgreSQL store, for fault tests (shared).

Each node is a subprocess with a short lease (a setting), so that its runs are reaped by
another node's `node/adopt.py` when it stops heartbeating, and a name its PostgreSQL
sessions carry in pg_stat_activity (`between_transactions`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import psycopg

from clean_env import without_slotline_variables
from slotline.models import Attempt
from slotline.store import Store
from slotline.store.pg_url import split_url
from waiting import until

APP = "slotline-node-"


def session_states(conn: psycopg.Connection[Any], app: str) -> list[str]:
    """The states (idle, active, idle in transaction…) of a program's PostgreSQL sessions."""
    query = "SELECT state FROM pg_stat_activity WHERE application_name = %s"
    return [row[0] for row in conn.execute(query, [app]).fetchall()]


class Nodes:
    """`slotline serve` subprocesses on one store, each with its own stderr file."""

    def __init__(self, url: str, tmp_path: Path, lease: float = 4.0) -> None:
        self.url, self.tmp_path, self.lease = url, tmp_path, lease
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self, node_id: str, *args: str, clock_offset: float = 0.0, url: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start node `node_id` on the store (or on `url`, the same store another way)."""
        env = without_slotline_variables()
        env["XDG_DATA_HOME"] = str(self.tmp_path / "xdg")
        if clock_offset:
            env["SLOTLINE_CLOCK_OFFSET"] = str(clock_offset)
        # Each node's sessions carry its name in pg_stat_activity (see `freeze`).
        url = f"{url or self.url}&application_name={APP}{node_id}"
        with open(self.tmp_path / f"{node_id}.err", "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "slotline", "--store", url, "serve", "--no-http",
                 "--node-id", node_id, "--lease", str(self.lease), "--log-level", "info",
                 "--log-dir", str(self.tmp_path / "logs" / node_id), *args],
                stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=self.tmp_path,
            )  # fmt: skip
        self.procs[node_id] = proc
        return proc

    def kill(self, node_id: str) -> None:
        """SIGKILL the node alone: the agents it started live on under their keepers."""
        proc = self.procs[node_id]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def kill_with_agents(self, node_id: str) -> None:
        """SIGKILL the node and every agent it started, as a machine that dies would."""
        proc = self.procs[node_id]
        proc.send_signal(signal.SIGSTOP)  # no new spawn between listing and killing
        keepers = psutil.Process(proc.pid).children()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        for keeper in keepers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(keeper.pid, signal.SIGKILL)

    def freeze(self, node_id: str) -> None:
        """SIGSTOP the node between two of its transactions (`between_transactions`)."""
        proc = self.procs[node_id]
        self.between_transactions(
            node_id,
            lambda: proc.send_signal(signal.SIGSTOP),
            lambda: proc.send_signal(signal.SIGCONT),
        )

    def between_transactions(
        self, node_id: str, stop: Callable[[], None], undo: Callable[[], None]
    ) -> None:
        """Call `stop` (which silences the node) at a moment when none of its store
        sessions is inside a transaction, as pg_stat_activity shows: stopped there, it
        holds no lock another node waits for. (A node stopped inside a transaction is the
        server's to end, after `idle_in_transaction_session_timeout`; waiting for that is
        not these tests' point.) `undo` takes the stop back, to try again."""
        conninfo, _ = split_url(self.url)
        with psycopg.connect(conninfo, autocommit=True) as conn:

            def states() -> list[str]:
                return session_states(conn, APP + node_id)

            for _ in range(100):
                until(lambda: set(states()) == {"idle"}, what=f"{node_id} between transactions")
                stop()
                # A query sent just before the stop may still run, or wait for a lock: one
                # the node's own stopped session holds, idle in a transaction, until the
                # server ends that session (10 s), and a lock wait behind it in turn (seen
                # past 30 s on a loaded machine). Not caught between transactions, either:
                # let it go on, and try again.
                with contextlib.suppress(AssertionError):
                    settled = until(lambda: "active" not in (now := states()) and now, 30, "")
                    if set(settled) == {"idle"}:
                        return
                undo()
        raise AssertionError(f"{node_id} was never caught between transactions")

    def stderr(self, node_id: str) -> str:
        return (self.tmp_path / f"{node_id}.err").read_text()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            proc.wait(timeout=60)


def live_runs(store: Store, node_id: str) -> list[Attempt]:
    """The attempts of `node_id` that run a process, as the store has them."""
    return [
        a for a in store.attempts()
        if a.node_id == node_id and a.finished_at is None and a.pid is not None
    ]  # fmt: skip


def reaped_reason(node_id: str) -> str:
    return f"interrupted: node {node_id} stopped heartbeating"
