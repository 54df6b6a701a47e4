"""The embedded SQLite backend: one file, WAL, `BEGIN IMMEDIATE` for every write.

Several processes may use one file at once (a CLI while a node runs). A commit wakes
watchers in every process through datagrams on small Unix sockets, so a submit from
another process is dispatched at once rather than at the next poll.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import socket
import sqlite3
import stat
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

from slotline.errors import StoreError
from slotline.store.base import Store
from slotline.store.core import Ahead, Serial, Watcher
from slotline.store.migrate import migrate
from slotline.store.queries import ConfigCache, ConfigRows, Tx, config_writes
from slotline.store.statements import Ids, load_queries
from slotline.store.windows import Pending

# An `Ids` parameter is read as a JSON array (`json_each`, see `statements.Ids`).
sqlite3.register_adapter(Ids, Ids.as_json)
log = logging.getLogger("slotline.store")

BUSY_TIMEOUT_MS = 60_000
# The WAL is copied back into the database file (a checkpoint, which syncs the file) by a
# thread of each process that writes, this often, rather than by whichever commit takes
# the WAL past SQLite's threshold: a claim or a submit must not wait for the disk (it
# did, for about 17 ms every ~57 hand-offs, bench/RESULTS.md). A commit still checkpoints
# past this many pages, should the thread fall behind.
CHECKPOINT_EVERY_S = 0.2
AUTOCHECKPOINT_PAGES = 20_000

# The version of the configuration tables (migration 0022), see `ConfigCache`.
_CONFIG_VERSION = "SELECT value FROM counters WHERE name = 'config'"


def default_path() -> Path:
    """The store file under the XDG data directory."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(Path.home(), ".local", "share")
    return Path(base) / "slotline" / "slotline.db"


class SQLiteStore(Store):
    """A store in one SQLite file."""

    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser().resolve()
        self.url = f"sqlite:///{self.path}"
        try:
            # Tasks hold commands, prompts and env (API keys): only the owner may read.
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self.path.exists():
                os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            self._conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from exc
        self._lock = threading.RLock()
        self._run_times = Pending()
        self._queries = load_queries("sqlite")
        # What transactions read of the configuration tables, kept while its version
        # stays (`ConfigCache`; the version is read once migrated, by the first
        # transaction that reads the configuration).
        self._config = ConfigCache()
        self._config_writes = config_writes(self.dialect)
        self._wake_dir = _wake_dir(self.path)
        # Started by the first write after the migration (a store only read starts none).
        self._checkpoints: _Checkpoints | None = None
        self._migrated = False
        try:
            with self._lock:
                self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                _enable_wal(self._conn, self.path)
                self._conn.execute("PRAGMA synchronous = NORMAL")
                self._conn.execute("PRAGMA foreign_keys = ON")
                self._conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
            self._migrate()
            self._migrated = True
        except BaseException:
            self._conn.close()  # e.g. SchemaTooNew: no store, so no open connection either
            raise

    def _migrate(self) -> None:
        with self._transaction(write=True) as tx:
            migrate(tx, self.dialect, str(self.path))

    @contextlib.contextmanager
    def _transaction(
        self, write: bool, serial: Serial = Serial.WRITES, ahead: Ahead = ()
    ) -> Iterator[Tx]:
        # `BEGIN IMMEDIATE` serializes every write, whatever `serial` allows; reads ahead
        # save nothing without a server to go to.
        with self._lock:
            if write and self._checkpoints is None and self._migrated:
                self._checkpoints = _Checkpoints(self.path, self)
            cur = self._conn.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot use the store at {self.path}: {exc}") from exc
            tx = Tx(cur, self._queries, None, self._config_of(), self._config_writes)
            try:
                yield tx
            except sqlite3.Error as exc:
                # A driver error is a store failure like any other (disk full, a damaged
                # file): callers retry StoreError, and must not die of another type.
                self._conn.rollback()
                raise StoreError(
                    f"a query failed on the store at {self.path}: {exc}. Check the disk "
                    "(space, permissions) and the file (`sqlite3 FILE 'PRAGMA integrity_check'`)."
                ) from exc
            except BaseException:
                self._conn.rollback()
                raise
            else:
                try:
                    tx.run_last_checks()
                    tx.flush_events()
                    cur.execute("COMMIT")
                    tx.committed = True
                except sqlite3.Error as exc:
                    self._conn.rollback()
                    raise StoreError(f"commit failed on {self.path}: {exc}") from exc
            finally:
                cur.close()

    def _config_of(self) -> Callable[[], ConfigRows | None] | None:
        """How a transaction finds what is kept of the configuration as of the
        version it reads (none while the store is migrated: the version may not exist)."""
        if not self._migrated:
            return None

        def at_version() -> ConfigRows | None:
            row = self._conn.execute(_CONFIG_VERSION).fetchone()
            return self._config.at(None if row is None else int(row[0]))

        return at_version

    def _notify(self, skip: str | None = None, full: bool = False) -> None:
        """Wake the watchers, after a commit: a wake-up that cannot be sent (no
        descriptor left, a folder not readable) must not fail the committed write, whose
        caller would take it for not done. Watchers also wake on their own timers."""
        try:
            names = os.listdir(self._wake_dir)
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("cannot wake the store's watchers: %s", exc)
            return
        try:
            sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        except OSError as exc:
            log.warning("cannot wake the store's watchers: %s", exc)
            return
        with sender:
            sender.setblocking(False)
            for name in names:
                if name == skip or (full and name.startswith(_DISPATCHING)):
                    continue
                target = os.path.join(self._wake_dir, name)
                try:
                    sender.sendto(b"!", target)
                except BlockingIOError:
                    pass  # its buffer is full: a wake-up is already pending there
                except (ConnectionRefusedError, FileNotFoundError):
                    with contextlib.suppress(OSError):
                        os.unlink(target)  # left behind by a process that died
                except OSError:
                    pass

    def watcher(self, dispatching: bool = False) -> Watcher:
        return _SocketWatcher(self._wake_dir, dispatching)

    def close(self) -> None:
        self._write_run_times()
        if self._checkpoints is not None:
            self._checkpoints.stop()
        with self._lock:
            self._conn.close()


class _Checkpoints:
    """A daemon thread, on a connection of its own, that checkpoints the WAL every
    CHECKPOINT_EVERY_S (PASSIVE: it never blocks a writer or waits for a reader). It
    stops when its store is closed or collected, or the file is gone."""

    def __init__(self, path: Path, store: SQLiteStore) -> None:
        self._path = path
        self._stop = threading.Event()
        weakref.finalize(store, self._stop.set)
        self._thread = threading.Thread(target=self._run, name="slotline-checkpoints", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            # mode=rw: a file deleted meanwhile is not made again.
            uri = f"{self._path.as_uri()}?mode=rw"
            conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        except sqlite3.Error:
            return
        try:
            while not self._stop.wait(CHECKPOINT_EVERY_S):
                if not self._path.exists():
                    return
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            return  # the writers' own checkpoints take over (AUTOCHECKPOINT_PAGES)
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)


def _enable_wal(conn: sqlite3.Connection, path: Path) -> None:
    # Switching a new file to WAL needs it to itself, and SQLite answers "database is
    # locked" at once instead of calling the busy handler: retry while another process
    # opening the same new file does the same.
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise StoreError(f"cannot open the store at {path}: {exc}") from exc
            time.sleep(0.01)


# Unix socket paths are limited to ~100 bytes: a socket's path is this base, two short
# folder names and a short file name, so a longer temp dir falls back to /tmp.
_MAX_WAKE_BASE = 48


def _wake_dir(path: Path) -> str:
    # The folder is named by a hash, in this user's private folder (see `_private_folder`).
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    base = tempfile.gettempdir()
    if len(os.fsencode(base)) > _MAX_WAKE_BASE:
        base = "/tmp"  # noqa: S108 - a private 0700 folder per user is made inside it
    return os.path.join(base, f"slotline-{os.getuid()}", digest)


def _private_folder(folder: str) -> None:
    """Make `folder` 0700, or check that the existing one is this user's and private
    (tightening a loose mode): the temp dir is shared, so anyone could have made it first.

    Raises:
        StoreError: it is not a folder (a symlink, a file) or belongs to another user.
    """
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise StoreError(
            f"the wake-up folder {folder} was not made by this user (uid {os.getuid()}) or "
            "is not a folder; another user may be trying to intercept wake-ups. Remove it, "
            "or point TMPDIR to a private folder"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(folder, 0o700)


# The start of a dispatching watcher's socket name: a commit after which the line is full
# sends it nothing (`Tx.line_full`). Not a datagram of its own, which it would have to
# read and pass over: a socket holds only a few unread datagrams (net.unix.max_dgram_qlen),
# and one sent to a full socket is dropped, so a real wake-up could be lost behind them.
_DISPATCHING = "d-"


class _SocketWatcher(Watcher):
    def __init__(self, folder: str, dispatching: bool = False) -> None:
        prefix = _DISPATCHING if dispatching else ""
        self.id = f"{prefix}{os.getpid()}-{secrets.token_hex(4)}"
        self.dispatching = dispatching
        self._path = os.path.join(folder, self.id)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        for attempt in range(5):
            # The last watcher to close removes the folder; make it again if it just went.
            try:
                _private_folder(os.path.dirname(folder))
                _private_folder(folder)
                self._sock.bind(self._path)
                break
            except FileNotFoundError:
                if attempt == 4:
                    self._sock.close()
                    raise
            except BaseException:
                self._sock.close()
                raise
        self._sock.setblocking(False)

    def _drain(self) -> bool:
        got = False
        while True:
            try:
                self._sock.recv(64)
            except BlockingIOError:
                return got
            got = True

    async def wait(self, timeout: float | None) -> bool:
        if self._drain():
            return True
        import asyncio  # only a follower waits: a one-shot command needs no event loop

        loop = asyncio.get_running_loop()
        try:
            # asyncio.timeout, not wait_for, which on Python 3.11 can swallow a
            # cancellation that comes as a datagram arrives.
            async with asyncio.timeout(timeout):
                await loop.sock_recv(self._sock, 64)
        except TimeoutError:
            return False
        self._drain()
        return True

    def close(self) -> None:
        self._sock.close()
        with contextlib.suppress(OSError):
            os.unlink(self._path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self._path))  # only when no other watcher is left
