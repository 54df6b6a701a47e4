"""Output follow: a running attempt's log streamed as it grows, a finished one in full."""

from __future__ import annotations

import os
from pathlib import Path

from .conftest import ServerFactory, command, until


def test_follow_streams_a_running_log_until_the_attempt_ends(
    make_server: ServerFactory, tmp_path: Path
) -> None:
    server = make_server(node=True)
    go = tmp_path / "go"
    os.mkfifo(go)
    # The command prints, blocks until the test writes to the FIFO, prints again and ends.
    script = command(
        "print('first line', flush=True)",
        f"open({str(go)!r}).read()",
        "print('second line', flush=True)",
    )
    with server.client() as http:
        task = http.post("/api/tasks", json={"command": script, "title": "talks"}).json()
        with http.stream("GET", f"/api/tasks/{task['id']}/log", params={"follow": "true"}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/plain")
            received = b""
            chunks = r.iter_bytes()
            while b"first line" not in received:
                received += next(chunks)
            assert b"second line" not in received
            go.write_text("go")
            for chunk in chunks:  # ends when the attempt has ended
                received += chunk
        assert received.decode().splitlines()[-2:] == ["first line", "second line"]
        until(lambda: http.get(f"/api/tasks/{task['id']}").json()["status"] == "succeeded")
        whole = http.get(f"/api/tasks/{task['id']}/log")
        assert whole.text.splitlines()[-2:] == ["first line", "second line"]
        tail = http.get(f"/api/tasks/{task['id']}/log", params={"offset": len(whole.content) - 12})
        assert tail.text == "second line\n"
        assert http.get(f"/api/tasks/{task['id']}/log", params={"attempt": 2}).status_code == 404


def test_a_task_that_has_not_run_has_no_log(make_server: ServerFactory) -> None:
    server = make_server()
    with server.client() as http:
        task = http.post("/api/tasks", json={"command": ["true"]}).json()
        missing = http.get(f"/api/tasks/{task['id']}/log")
        assert missing.status_code == 404
        assert "no log yet" in missing.json()["detail"]
