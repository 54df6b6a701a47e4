"""The keeper server and its client: requests sent together, answered in order, each with
its own keeper, which leads its own session by the time its pid is answered."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import IO

from slotline.runner.keepers import WRAP, KeeperServer, _Server
from waiting import until

SLEEPER = ["sleep", "30"]


def keeper_argv(exit_path: Path, command: list[str]) -> list[str]:
    """`wrap.main`'s arguments: no memory cap, no workspace, a 1 MB log, no fence."""
    return [str(exit_path), "0", "", "1000000", "", "--", *command]


def pid_file(exit_path: Path) -> Path:
    return exit_path.with_suffix(".pid")


def stop_groups(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


def test_requests_sent_at_once_are_each_answered_with_their_own_keeper(tmp_path: Path) -> None:
    server = KeeperServer()
    count = 12
    exits = [tmp_path / f"{i}.exit" for i in range(count)]
    answers: dict[int, int] = {}
    errors: list[BaseException] = []
    together = threading.Barrier(count)

    def start(i: int) -> None:
        try:
            together.wait()
            env = dict(os.environ)
            answers[i] = server.start_keeper(keeper_argv(exits[i], SLEEPER), env, exits[i])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(i,)) for i in range(count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        assert len(answers) == count
        for i, pid in answers.items():
            # The keeper writes its own pid: the answer is that of this request's keeper.
            written = until(lambda i=i: pid_file(exits[i]).exists(), what=f"keeper {i}'s pid")
            assert written
            assert int(pid_file(exits[i]).read_text()) == pid
            assert os.getsid(pid) == pid, "each keeper leads a session of its own"
    finally:
        stop_groups(list(answers.values()))
        server.close()


def test_requests_waiting_on_a_server_that_died_are_sent_to_the_next(tmp_path: Path) -> None:
    server = KeeperServer()
    pids: list[int] = []
    try:
        first = tmp_path / "first.exit"
        pids.append(server.start_keeper(keeper_argv(first, SLEEPER), dict(os.environ), first))
        dead = server._pid
        assert dead is not None
        os.kill(dead, signal.SIGKILL)
        until(lambda: _ended(dead), what="the server's end")
        exits = [tmp_path / f"{i}.exit" for i in range(6)]
        answered: list[int] = []
        threads = [
            threading.Thread(
                target=lambda e=e: answered.append(
                    server.start_keeper(keeper_argv(e, SLEEPER), dict(os.environ), e)
                )
            )
            for e in exits
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        pids.extend(answered)
        assert len(answered) == len(exits), "every request is answered by the next server"
        assert server._pid not in (None, dead)
        for exit_path in exits:
            until(pid_file(exit_path).exists, what="a keeper's pid file")
        assert sorted(int(pid_file(e).read_text()) for e in exits) == sorted(answered)
    finally:
        stop_groups(pids)
        server.close()


def _ended(pid: int) -> bool:
    """Whether `pid` (a child of this process) has ended; reaps it if so."""
    try:
        return os.waitpid(pid, os.WNOHANG)[0] == pid
    except ChildProcessError:
        return True


def _serve() -> tuple[subprocess.Popen[bytes], IO[bytes], IO[bytes]]:
    """wrap.py's keeper server, driven by the test: it, its stdin and its stdout."""
    server = subprocess.Popen(
        [sys.executable, "-I", "-S", WRAP, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    return server, server.stdin, server.stdout


def test_requests_written_together_are_answered_in_order_once_each_keeper_leads_its_session(
    tmp_path: Path,
) -> None:
    server, requests, answers = _serve()
    exits = [tmp_path / f"{i}.exit" for i in range(8)]
    pids: list[int] = []
    try:
        lines = [
            json.dumps({"argv": keeper_argv(e, SLEEPER), "env": dict(os.environ), "log": str(e)})
            for e in exits
        ]
        # One write: the server reads them all at once and forks them together.
        requests.write("".join(f"{line}\n" for line in lines).encode())
        requests.flush()
        for _ in exits:
            pid = int(answers.readline())
            # Answered only once the keeper leads its session: a stop would find its group.
            assert os.getsid(pid) == pid
            pids.append(pid)
        for exit_path, pid in zip(exits, pids, strict=True):
            until(pid_file(exit_path).exists, what="a keeper's pid file")
            assert int(pid_file(exit_path).read_text()) == pid, "answers come in request order"
    finally:
        stop_groups(pids)
        requests.close()
        server.wait(30)
        answers.close()


def test_a_request_it_cannot_read_is_answered_so_and_the_batch_goes_on(tmp_path: Path) -> None:
    server, requests, answers = _serve()
    first, last = tmp_path / "1.exit", tmp_path / "3.exit"
    pids: list[int] = []
    try:
        good = [
            json.dumps({"argv": keeper_argv(e, SLEEPER), "env": dict(os.environ), "log": str(e)})
            for e in (first, last)
        ]
        # A refusal between two forks: the keeper after it must not be handed its -1.
        requests.write(f"{good[0]}\n{{}}\n{good[1]}\n".encode())
        requests.flush()
        said = [answers.readline().decode().strip() for _ in range(3)]
        assert said[1].startswith("! not a keeper request")
        pids = [int(said[0]), int(said[2])]
        for exit_path, pid in zip((first, last), pids, strict=True):
            until(pid_file(exit_path).exists, what="a keeper's pid file")
            assert int(pid_file(exit_path).read_text()) == pid
            assert os.getsid(pid) == pid
    finally:
        stop_groups(pids)
        requests.close()
        server.wait(30)
        answers.close()


def _bare_server() -> tuple[_Server, int, int]:
    """A `_Server` on two pipes and no process: the test plays the server, through the
    read end of its requests and the write end of its answers (returned)."""
    to_server, requests = os.pipe()
    answers, from_server = os.pipe()
    return _Server(-1, requests, answers), to_server, from_server


def test_a_request_that_could_not_be_sent_leaves_the_answers_already_written_to_theirs() -> None:
    server, to_server, from_server = _bare_server()
    sent: Future[str] = Future()
    server.send(b'{"n": 1}\n', sent)
    os.write(from_server, b"4242\n")  # its answer, written before the server died
    os.close(to_server)  # it died: the next request cannot be sent
    refused: Future[str] = Future()
    server.send(b'{"n": 2}\n', refused)
    assert refused.result(0) == ""
    reader = threading.Thread(target=server._read)
    reader.start()
    os.close(from_server)
    reader.join(30)
    assert sent.result(0) == "4242", "an answer in the pipe is not thrown away"
    assert server.answers == -1, "the reader forgets the descriptor it closed"
    later: Future[str] = Future()
    server.send(b'{"n": 3}\n', later)
    assert later.result(0) == "", "nothing more is sent to a server that died"
    server.stop()


def test_an_answer_that_is_not_text_fails_its_request_not_the_reader() -> None:
    server, to_server, from_server = _bare_server()
    reader = threading.Thread(target=server._read)
    reader.start()
    first: Future[str] = Future()
    second: Future[str] = Future()
    server.send(b"{}\n", first)
    server.send(b"{}\n", second)
    os.write(from_server, b"! cannot import \xff\xfe\n31337\n")
    assert first.result(30).startswith("! cannot import")
    assert second.result(30) == "31337", "the reader goes on after an odd answer"
    os.close(from_server)
    reader.join(30)
    server.stop()
    os.close(to_server)
