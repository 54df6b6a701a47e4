"""A real HTTP receiver for webhook tests, on 127.0.0.1: it records every POST (headers
and body) and can hang its first answers until released (so that a node is killed in
the middle of a delivery)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def seq(self) -> int:
        return int(self.json()["seq"])

    def verifies(self, secret: str) -> bool:
        """Whether `Slotline-Signature` is the HMAC-SHA256 of "t.body" under `secret`."""
        parts = dict(p.split("=", 1) for p in self.headers["slotline-signature"].split(","))
        signed = parts["t"].encode() + b"." + self.body
        expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, parts["v1"])


class Receiver:
    """`url` takes POSTs; `received` lists them in arrival order."""

    def __init__(self, hang_first: int = 0, status: int = 200) -> None:
        self.received: list[Received] = []
        self.hang_first = hang_first
        self.status = status
        self.release = threading.Event()
        self.hanging = threading.Event()  # set once a request is being held
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with receiver._lock:
                    receiver.received.append(
                        Received({k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    hang = receiver.hang_first > 0
                    receiver.hang_first -= 1
                if hang:
                    receiver.hanging.set()
                    receiver.release.wait(60)
                    return  # no answer at all: the connection closes
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/hook"

    def seqs(self) -> list[int]:
        with self._lock:
            return [r.seq for r in self.received]

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
