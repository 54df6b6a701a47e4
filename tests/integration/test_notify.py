"""Webhooks and command hooks of `slotline serve`, against a real HTTP receiver on
127.0.0.1: signed deliveries, at least once across a kill -9 of the node in the middle
of one (a duplicate carries the same seq), one delivering node on PostgreSQL."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
import yaml

from clean_env import without_slotline_variables
from receiver import Receiver
from slotline.models import Status
from slotline.store import Store, open_store
from waiting import until

SECRET = "whsec-Zq81-do-not-leak"
SELECTED = {"succeeded": "task.succeeded", "failed": "task.failed", "drained": "queue.drained"}


def write_config(tmp_path: Path, **config: object) -> Path:
    path = tmp_path / "slotline.yaml"
    path.write_text(yaml.safe_dump({"lease": 3, **config}))
    return path


def start_node(
    store_url: str, tmp_path: Path, config: Path, node_id: str = "notifier"
) -> subprocess.Popen[bytes]:
    env = without_slotline_variables()
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    with (tmp_path / f"{node_id}.err").open("ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "slotline", "--store", store_url, "serve", "--no-http",
             "--config", str(config), "--node-id", node_id],
            stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp_path,
        )  # fmt: skip


def stop(node: subprocess.Popen[bytes]) -> None:
    node.send_signal(signal.SIGTERM)
    assert node.wait(timeout=60) == 0


def started(store: Store) -> set[str]:
    """The nodes that have registered with the store (a `node_started` event each)."""
    return {str(e.data.get("node")) for e in store.events(0, 10_000) if e.kind == "node_started"}


def hooks_ready(store: Store, count: int = 1) -> bool:
    """True once a node has created the hooks' cursors (it hears events from then on)."""
    return len(store.notify_cursors([])) >= count


def selected_seqs(store: Store) -> set[int]:
    return {e.seq for e in store.events(0, 10_000) if e.kind in SELECTED}


def selected_kinds(store: Store) -> set[str]:
    return {e.kind for e in store.events(0, 10_000) if e.kind in SELECTED}


@pytest.mark.timeout(240)
def test_every_selected_event_arrives_signed_across_a_kill_9_mid_delivery(
    store_url: str, tmp_path: Path
) -> None:
    # Given a webhook for successes, failures and the queue draining, whose receiver
    # holds its first answer (so that the node dies in the middle of that delivery),
    store = open_store(store_url)
    with Receiver(hang_first=1) as receiver:
        webhook = {"url": receiver.url, "events": list(SELECTED.values()), "secret": SECRET}
        config = write_config(tmp_path, notify=[webhook])
        node = start_node(store_url, tmp_path, config)
        try:
            until(lambda: hooks_ready(store), 60, "the node's hooks")
            store.submit({"command": ["true"], "title": "fine"})
            store.submit({"command": ["false"], "title": "broken"})
            # when the node is killed with SIGKILL while the first delivery waits for
            # its answer, and started again,
            until(receiver.hanging.is_set, 60, "the first delivery")
        finally:
            node.send_signal(signal.SIGKILL)
            node.wait(timeout=10)
        first = receiver.received[0]
        node = start_node(store_url, tmp_path, config)
        try:
            # then every selected event arrives (the queue drains once or twice: the
            # first task may end before the second is submitted),
            until(lambda: selected_kinds(store) == set(SELECTED), 60, "both ends and a drain")
            until(lambda: selected_seqs(store) <= set(receiver.seqs()), 90, "every event")
        finally:
            stop(node)
    seqs = receiver.seqs()
    # the one whose delivery was cut off twice, with the same seq and event,
    assert seqs.count(first.seq) == 2, seqs
    again = next(r for r in receiver.received[1:] if r.seq == first.seq)
    assert again.json()["event"] == first.json()["event"]
    assert again.headers["slotline-seq"] == str(first.seq)
    # each one signed with the secret (and with nothing else),
    assert all(r.verifies(SECRET) for r in receiver.received)
    assert not any(r.verifies("another secret") for r in receiver.received)
    kinds = {r.json()["seq"]: r.json()["event"] for r in receiver.received}
    assert set(kinds) == selected_seqs(store)
    assert set(kinds.values()) == set(SELECTED.values())
    assert {r.json()["task"]["title"] for r in receiver.received if r.json()["task"]} == {
        "fine",
        "broken",
    }
    # and the delivery log has them, the secret appears in no log.
    log = store.notify_log()
    assert {d.seq for d in log if d.ok} == set(kinds)
    logs = (tmp_path / "notifier.err").read_text() + json.dumps([d.to_dict() for d in log])
    assert SECRET not in logs
    store.close()


@pytest.mark.postgres
@pytest.mark.timeout(240)
def test_two_nodes_on_postgres_deliver_each_event_once(pg_url: str, tmp_path: Path) -> None:
    # Given two nodes on one PostgreSQL store with the same webhook,
    store = open_store(pg_url)
    store.set_setting("max_concurrent", 4)
    with Receiver() as receiver:
        webhook = {"url": receiver.url, "events": ["task.succeeded", "task.failed"]}
        config = write_config(tmp_path, notify=[webhook], lease=15)
        nodes = [start_node(pg_url, tmp_path, config, name) for name in ("one", "two")]
        try:
            until(lambda: hooks_ready(store), 60, "the nodes' hooks")
            # (both up, so that each stops cleanly: a loaded machine starts one late)
            until(lambda: started(store) >= {"one", "two"}, 60, "both nodes started")
            # when twelve tasks succeed or fail,
            for i in range(12):
                store.submit({"command": ["true"] if i % 3 else ["false"]})
            ends = {"succeeded", "failed"}
            wanted = lambda: {e.seq for e in store.events(0, 10_000) if e.kind in ends}  # noqa: E731
            until(lambda: len(wanted()) == 12 and wanted() <= set(receiver.seqs()), 120, "all")
        finally:
            for node in nodes:
                stop(node)
    # then each arrived exactly once (no crash: no duplicate), from one node at a time.
    counts = Counter(receiver.seqs())
    assert set(counts.values()) == {1}, counts
    assert len({d.node_id for d in store.notify_log() if d.ok}) == 1
    store.close()


def test_a_command_hook_runs_its_argv_template(sqlite_url: str, tmp_path: Path) -> None:
    # Given a command hook for failed tasks (a program with the title in one argument,
    # after a `--`, as a title may begin an argument only there),
    out = tmp_path / "heard.txt"
    script = "import sys; open(sys.argv[2], 'a').write(sys.argv[3] + '|' + sys.argv[4] + '\\n')"
    hook = [sys.executable, "-c", script, "--", str(out), "{title} failed", "{event}"]
    config = write_config(tmp_path, on_event={"task.failed": hook})
    store = open_store(sqlite_url)
    node = start_node(sqlite_url, tmp_path, config)
    try:
        until(lambda: hooks_ready(store), 60, "the node's hooks")
        # when a task succeeds and one fails,
        store.submit({"command": ["true"], "title": "fine one"})
        store.submit({"command": ["false"], "title": "the $(rm -rf) one"})
        store.submit({"command": ["false"], "title": "-x"})
        until(lambda: out.exists() and out.read_text().count("\n") == 2, 60, "the output")
        # (its delivery is logged once the hook's process has exited)
        until(lambda: len(store.notify_log()) == 2, 60, "the hook's deliveries logged")
    finally:
        stop(node)
    # then the hook ran once per failure, the title one argument and never parsed, also
    # for the title that looks like an option (nothing is dropped).
    heard = sorted(out.read_text().splitlines())
    assert heard == ["-x failed|task.failed", "the $(rm -rf) one failed|task.failed"]
    deliveries = store.notify_log()
    assert {(d.hook, d.ok, d.status) for d in deliveries} == {("on_event.task.failed.0", True, 0)}
    store.close()


def test_a_failing_webhook_is_retried_then_logged_as_failed(
    sqlite_url: str, tmp_path: Path
) -> None:
    # Given a webhook whose receiver always answers 500, allowed two tries,
    store = open_store(sqlite_url)
    with Receiver(status=500) as receiver:
        webhook = {"url": receiver.url, "events": ["task.succeeded"], "max_attempts": 2}
        config = write_config(tmp_path, notify=[webhook])
        node = start_node(sqlite_url, tmp_path, config)
        try:
            until(lambda: hooks_ready(store), 60, "the node's hooks")
            store.submit({"command": ["true"]})
            until(lambda: len(store.notify_log()) == 2, 60, "two tries")
        finally:
            stop(node)
    # then both tries reached it with the same seq, and the log says why they failed.
    seqs = receiver.seqs()
    assert len(seqs) == 2
    assert seqs[0] == seqs[1]
    tries = store.notify_log()
    assert [(d.attempt, d.ok, d.status) for d in tries] == [(2, False, 500), (1, False, 500)]
    assert tries[0].error == "answered HTTP 500"
    store.close()


class Silent:
    """A receiver on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.mark.timeout(120)
def test_dispatch_goes_on_while_a_webhook_receiver_hangs(store_url: str, tmp_path: Path) -> None:
    # Given a webhook for every start and end whose receiver accepts and never answers,
    store = open_store(store_url)
    silent = Silent()
    hook = {"url": silent.url, "events": ["task.started", "task.succeeded"], "timeout": 60}
    config = write_config(tmp_path, max_concurrent=2, notify=[hook])
    node = start_node(store_url, tmp_path, config)
    try:
        until(lambda: hooks_ready(store), 60, "the node's hooks")
        # When tasks are submitted while the first delivery hangs,
        first = store.submit({"command": ["true"], "title": "first"})
        until(lambda: silent.accepted, 60, "the receiver's first connection")
        ids = [first.id] + [
            store.submit({"command": ["true"], "title": f"t{i}"}).id for i in range(5)
        ]
        # Then every task still starts and succeeds, the delivery still hanging.
        until(lambda: all(store.get(i).status is Status.SUCCEEDED for i in ids), 60, "all succeed")
        assert not [d for d in store.notify_log() if d.ok]
    finally:
        stop(node)
        silent.close()
        store.close()


TOKEN_PATH = "/services/T0001/B0002/SeCrEtToKeN123"


@pytest.mark.timeout(180)
def test_a_token_in_a_webhook_path_reaches_no_log_and_no_error(
    sqlite_url: str, tmp_path: Path
) -> None:
    # Given two webhooks carrying a token in their path (as Slack's do): one that answers,
    # one on a port nothing listens on (a connection error), the node logging at DEBUG,
    closed = socket.create_server(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{closed.getsockname()[1]}{TOKEN_PATH}?key=QuErYsEcReT"
    closed.close()
    store = open_store(sqlite_url)
    with Receiver() as receiver:
        live = receiver.url.removesuffix("/hook") + TOKEN_PATH
        hooks = [
            {"url": live, "events": ["task.succeeded"]},
            {"url": dead, "events": ["task.succeeded"], "max_attempts": 1},
        ]
        config = write_config(tmp_path, notify=hooks)
        env = without_slotline_variables()
        env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
        with (tmp_path / "node.err").open("ab") as err:
            node = subprocess.Popen(
                [sys.executable, "-m", "slotline", "--store", sqlite_url, "serve",
                 "--no-http", "--config", str(config), "--log-level", "debug"],
                stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp_path,
            )  # fmt: skip
        try:
            until(lambda: hooks_ready(store, 2), 60, "the node's hooks")
            store.submit({"command": ["true"]})
            until(lambda: len(receiver.received) == 1, 60, "the live hook's delivery")
            until(lambda: any(not d.ok for d in store.notify_log()), 60, "the dead hook's try")
        finally:
            stop(node)
    # then the delivery log names both hooks by scheme, host and a hash, each apart,
    shown = subprocess.run(
        [sys.executable, "-m", "slotline", "--store", sqlite_url, "notify", "log", "--json"],
        capture_output=True, text=True, env=env, check=True,
    ).stdout  # fmt: skip
    names = {d["hook"] for d in json.loads(shown)}
    assert len(names) == 2
    assert all("/…#" in name for name in names)
    failed = next(d for d in json.loads(shown) if not d["ok"])
    assert failed["error"].startswith("ConnectError posting to http://127.0.0.1:")
    # and neither the token in the path nor the one in the query is anywhere.
    node_log = (tmp_path / "node.err").read_text()
    assert "notify" in node_log  # the warning about the failed try is there
    for text in (node_log, shown, json.dumps(store.notify_cursors([]))):
        assert "SeCrEtToKeN123" not in text
        assert "QuErYsEcReT" not in text
        assert "/services/" not in text
    store.close()


@pytest.mark.timeout(240)
def test_two_nodes_with_different_hooks_each_deliver_their_own(
    store_url: str, tmp_path: Path
) -> None:
    # Given two nodes on one store, each with a webhook of its own configuration,
    store = open_store(store_url)
    with Receiver() as first, Receiver() as second:
        nodes = []
        for name, receiver in (("one", first), ("two", second)):
            folder = tmp_path / name
            folder.mkdir()
            webhook = {"url": receiver.url, "events": ["task.succeeded"], "name": name}
            config = write_config(folder, notify=[webhook])
            nodes.append(start_node(store_url, folder, config, name))
        try:
            until(lambda: hooks_ready(store, 2), 60, "both nodes' hooks")
            until(lambda: started(store) >= {"one", "two"}, 60, "both nodes started")
            # when tasks succeed,
            for _ in range(4):
                store.submit({"command": ["true"]})
            wanted = lambda: {e.seq for e in store.events(0, 10_000) if e.kind == "succeeded"}  # noqa: E731
            # then each hook hears of every one, while both nodes are up.
            for receiver in (first, second):
                until(
                    lambda r=receiver: len(wanted()) == 4 and wanted() <= set(r.seqs()),
                    120, "every success at both hooks",
                )  # fmt: skip
        finally:
            for node in nodes:
                stop(node)
    by_hook = {d.hook: d.node_id for d in store.notify_log() if d.ok}
    assert by_hook == {"one": "one", "two": "two"}
    store.close()
