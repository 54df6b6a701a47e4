"""A TCP forwarder a test puts between a node and PostgreSQL, to cut them apart at will.

`pause()` simulates a partition: every connection stays open and new ones are accepted,
but no byte crosses either way until `resume()` (what a dropped route looks like to both
ends: silence, not an error). `cut()` is the loud kind: every connection is closed and new
ones are closed at once, until `resume()`. Threads, one per direction per connection;
`close()` ends them all.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class PausableProxy:
    """Forwards 127.0.0.1:`port` (chosen free) to `upstream`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._refusing = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._spawn(self._accept)

    def pause(self) -> None:
        """Stop forwarding bytes both ways; connections stay open, new ones are accepted."""
        self._flowing.clear()

    def cut(self) -> None:
        """Close every connection, and each new one at once, until `resume()`."""
        self._refusing.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        _close(sockets)

    def resume(self) -> None:
        """Forward again what waited, and what comes; accept connections again."""
        self._refusing.clear()
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        with self._lock:
            sockets, self._sockets = [self._listener, *self._sockets], []
        _close(sockets)
        for thread in self._threads:
            thread.join(timeout=5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            if self._refusing.is_set():
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed.is_set():
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            self._spawn(self._pump, client, server)
            self._spawn(self._pump, server, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while True:
            try:
                chunk = source.recv(65536)
            except OSError:
                chunk = b""
            self._flowing.wait()  # paused: hold the chunk (and what follows it) back
            if not chunk or self._closed.is_set():
                break
            try:
                sink.sendall(chunk)
            except OSError:
                break
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def _close(sockets: list[socket.socket]) -> None:
    """Close `sockets`, waking the threads that read them."""
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
