"""Task tokens: the API credential a running attempt gets in `SLOTLINE_TOKEN`.

A task token is `slt_task.<attempt id>.<mac>`, where mac is the HMAC-SHA256 of the
attempt id keyed by the attempt's own secret token (the one its runner reports with,
kept in the store and never sent by the API or given to the run). Nothing new is
stored: a server verifies a task token by reading the attempt from the store and
recomputing the mac, so it works on any node sharing the store and across restarts,
and it dies with the attempt (a finished or superseded attempt is refused). The server
turns it into a principal scoped to the task's subtree (see `slotline.server.context`).
"""

from __future__ import annotations

import hashlib
import hmac
import re

from slotline.models import Attempt

TASK_TOKEN_PREFIX = "slt_task."  # noqa: S105 - a marker, not a secret
_CONTEXT = b"slotline task token v1:"
_SHAPE = re.compile(r"^slt_task\.([0-9a-f]{32})\.([0-9a-f]{64})$")


def _mac(attempt_id: str, secret: str) -> str:
    return hmac.new(secret.encode(), _CONTEXT + attempt_id.encode(), hashlib.sha256).hexdigest()


def mint_task_token(attempt: Attempt) -> str:
    """The task token of `attempt` (the same every time it is asked for)."""
    return f"{TASK_TOKEN_PREFIX}{attempt.id}.{_mac(attempt.id, attempt.token)}"


def is_task_token(token: str) -> bool:
    return token.startswith(TASK_TOKEN_PREFIX)


def task_token_attempt(token: str) -> str | None:
    """The attempt id a task token names, or None if it is not shaped like one."""
    match = _SHAPE.match(token)
    return match.group(1) if match else None


def same_token(stored: str, given: str) -> bool:
    """Whether `given` is an attempt's own secret token `stored`, compared in constant
    time as bytes: any text given is only a right or a wrong token (`compare_digest`
    refuses text that is not ASCII; a lone surrogate, which JSON can carry, is kept)."""
    return hmac.compare_digest(
        stored.encode(errors="surrogatepass"), given.encode(errors="surrogatepass")
    )


def task_token_matches(token: str, attempt: Attempt) -> bool:
    """Whether `token` is the task token of `attempt` (compared in constant time)."""
    return hmac.compare_digest(token.encode(), mint_task_token(attempt).encode())
