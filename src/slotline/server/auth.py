"""API tokens: roles admin/user/viewer, kept hashed in a 0600 JSON file, checked per request.

The file is `$SLOTLINE_TOKENS`, else `$XDG_CONFIG_HOME/slotline/tokens.json` (by default
`~/.config/slotline/tokens.json`). Only the SHA-256 of each token is stored; the plaintext
is shown once, by `create_token`. No token file (or an empty one) means open single-user
mode, which the server allows on a loopback address only, and only until the file has
held a token (see `AuthMode`).

Besides these tokens, a running attempt holds a task token (`slotline.tasktoken`): its
principal has the role `task` and sees and steers only its task's subtree.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotline.clock import utcnow
from slotline.errors import InvalidInput, StoreError
from slotline.models import Task

ROLES = ("admin", "user", "viewer")
TOKEN_PREFIX = "slt_"  # noqa: S105 - a marker, not a secret
_NAME = re.compile(r"^[A-Za-z0-9_.:@/+-]{1,128}$")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: the token's name and role. A user's tasks are those whose `user`
    field is the token name. A task token (role `task`) is named `task:ID` and carries
    its task's subtree (the task and its descendants, as of authentication) and the user
    its subtasks are submitted as."""

    name: str
    role: str
    subtree: frozenset[str] = frozenset()
    owner: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def can_write(self) -> bool:
        return self.role in ("admin", "user", "task")

    @property
    def sees_all(self) -> bool:
        """Whether every task is visible (admins, viewers); else `sees` filters."""
        return self.role in ("admin", "viewer")

    @property
    def task_id(self) -> str | None:
        """The task a task token was given to; None for other principals."""
        return self.name.removeprefix("task:") if self.role == "task" else None

    @property
    def prefix_owner(self) -> str | None:
        """The user whose tasks an id prefix may match for this principal (None: any), so
        that an ambiguous prefix reveals no task it may not see."""
        if self.role == "user":
            return self.name
        return self.owner if self.role == "task" else None

    def sees(self, task: Task) -> bool:
        """Admins and viewers see every task; a user only their own; a task its subtree."""
        if self.role == "task":
            return task.id in self.subtree
        return self.role != "user" or task.user == self.name

    @property
    def scope(self) -> tuple[str | None, str | None]:
        """`sees` as the store's listings take it, (owner, root): a user's own tasks; a
        task token's subtree; (None, None) for those who see every task."""
        return (self.name if self.role == "user" else None), self.task_id

    def steers(self, task: Task) -> bool:
        """Admins steer every task; a user only their own; a task its subtree; a viewer none."""
        return self.is_admin or (self.role in ("user", "task") and self.sees(task))


# Who a request is when no token exists: the single local user, with every right.
OPEN_MODE = Principal("local", "admin")


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """One stored token, without its secret."""

    name: str
    role: str
    created_at: float


def default_tokens_path() -> Path:
    """`$SLOTLINE_TOKENS`, else tokens.json under the XDG config directory."""
    explicit = os.environ.get("SLOTLINE_TOKENS")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "slotline" / "tokens.json"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _read(path: Path) -> list[dict[str, Any]]:
    return _parse(path, _text(path))


def _text(path: Path) -> str | None:
    """The token file's text; None when there is none."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read the token file {path}: {exc}") from exc


def _parse(path: Path, text: str | None) -> list[dict[str, Any]]:
    if text is None:
        return []
    try:
        data = json.loads(text) if text.strip() else {"tokens": []}
        entries = data["tokens"]
        if not isinstance(entries, list):
            raise TypeError("tokens is not a list")
        return [dict(e) for e in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"the token file {path} is damaged ({exc}); fix or remove it") from exc


def _write(path: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the file atomically; it is created 0600 in a 0700 directory."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=".tokens-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump({"tokens": entries}, handle, indent=2, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def create_token(name: str, role: str, path: Path | None = None) -> str:
    """Create a token and return its plaintext (shown once; only its hash is stored).

    Raises:
        InvalidInput: the role is unknown, the name malformed or already taken.
    """
    if role not in ROLES:
        raise InvalidInput(f"unknown role {role!r}; use one of {', '.join(ROLES)}")
    if not _NAME.match(name):
        raise InvalidInput("a token name must be 1-128 letters, digits or . _ : @ / + -")
    path = path or default_tokens_path()
    entries = _read(path)
    if any(e.get("name") == name for e in entries):
        raise InvalidInput(f"a token named {name!r} exists; revoke it first or pick another name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    entries.append(
        {"name": name, "role": role, "sha256": _digest(token), "created_at": round(utcnow(), 3)}
    )
    _write(path, entries)
    return token


def revoke_token(name: str, path: Path | None = None) -> bool:
    """Remove the token called `name`; returns whether there was one."""
    path = path or default_tokens_path()
    entries = _read(path)
    kept = [e for e in entries if e.get("name") != name]
    if len(kept) == len(entries):
        return False
    _write(path, kept)
    return True


def list_tokens(path: Path | None = None) -> list[TokenInfo]:
    """The stored tokens (names, roles, creation times), never their secrets."""
    return [
        TokenInfo(str(e["name"]), str(e["role"]), float(e.get("created_at", 0)))
        for e in _read(path or default_tokens_path())
    ]


def verify_token(token: str, path: Path | None = None) -> Principal | None:
    """The principal a presented token stands for, or None if no stored token matches."""
    return TokenBook(path or default_tokens_path()).verify(token)


class TokenBook:
    """The token file as the server sees it: re-read whenever it changes on disk, so a
    token created or revoked while the server runs takes effect at once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        # The file's text as last parsed: read on every check (a small file), so a
        # token revoked and created again within one clock tick is still seen.
        self._text: str | None = None
        self._entries: list[dict[str, Any]] = []

    def _current(self) -> list[dict[str, Any]]:
        text = _text(self.path)
        with self._lock:
            if text != self._text:
                self._entries = _parse(self.path, text)
                self._text = text
            return self._entries

    def has_tokens(self) -> bool:
        return bool(self._current())

    def exists(self) -> bool:
        """Whether the file is there: tokens have been created, even if all are revoked."""
        self._current()
        return self._text is not None

    def verify(self, token: str) -> Principal | None:
        digest = _digest(token)
        found = None
        for entry in self._current():
            # Compare against every entry so the time taken does not tell which matched.
            if hmac.compare_digest(str(entry.get("sha256", "")), digest):
                found = Principal(str(entry["name"]), str(entry["role"]))
        return found
