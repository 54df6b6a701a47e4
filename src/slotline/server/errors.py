"""Errors as HTTP answers: one JSON shape, a fixed status per kind, never a 500 for bad input.

    AccessDenied                     403  (what a user may not choose: slotline.reach)
    NotFound                         404
    InvalidTransition, StaleAttempt  409  (the message names the current state)
    InvalidInput, AmbiguousId        422  (the message names the field)
    BoundExceeded                    429  (the limit, its maximum, and Retry-After from the
                                           ETAs: when a place is expected to free)
    StoreError                       503
    malformed JSON                   400
    body over the size cap           413

The body is always `{"detail": "...", "type": "NotFound", ...}`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from slotline.errors import (
    AccessDenied,
    AmbiguousId,
    BoundExceeded,
    InvalidInput,
    InvalidTransition,
    NotFound,
    SlotlineError,
    StaleAttempt,
    StoreError,
)
from slotline.server.schemas import ErrorOut

_HTTP_METHODS = {"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}
log = logging.getLogger("slotline.server")

STATUS_OF: tuple[tuple[type[SlotlineError], int], ...] = (
    (AccessDenied, 403),
    (NotFound, 404),
    (InvalidTransition, 409),
    (StaleAttempt, 409),
    (BoundExceeded, 429),
    (InvalidInput, 422),
    (AmbiguousId, 422),
    (StoreError, 503),
)

_HTTP_TYPES = {
    400: "MalformedRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "PayloadTooLarge",
}

# Documented on every route, so clients and fuzzers know each answer.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorOut, "description": text}
    for code, text in (
        (400, "Malformed JSON"),
        (401, "No token, or a wrong one"),
        (403, "The token's role does not allow this"),
        (404, "No such task"),
        (409, "The verb does not apply to the task's current state"),
        (413, "The body is larger than the server accepts"),
        (422, "A field is invalid (the message names it)"),
        (429, "A bound (queue size, depth, children) was reached"),
        (503, "The store cannot be used"),
    )
}


def status_for(exc: SlotlineError) -> int:
    for kind, code in STATUS_OF:
        if isinstance(exc, kind):
            return code
    return 500


# When a bound refuses and no estimate says when room comes (paused, nothing running).
RETRY_UNKNOWN = 30


def retry_after(exc: BoundExceeded) -> int | None:
    """Whole seconds after which a refused submit may succeed, from the ETAs; None when
    waiting cannot help (max_depth)."""
    if exc.details.get("limit") == "max_depth":
        return None
    hint = exc.details.get("retry_after")
    return RETRY_UNKNOWN if hint is None else max(1, math.ceil(float(hint)))


def error_body(detail: str, kind: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": detail, "type": kind}
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def slotline_error_response(exc: SlotlineError) -> JSONResponse:
    details = exc.details
    extra: dict[str, Any] = {}
    if "status" in details:
        extra["status"] = str(details["status"])
    if "files" in details:  # a merge's conflicting files
        extra["files"] = [str(name) for name in details["files"]]
    headers = None
    if isinstance(exc, BoundExceeded):
        extra["limit"] = details.get("limit")
        extra["max"] = details.get("max")
        wait = retry_after(exc)
        if wait is not None:
            extra["retry_after"] = wait
            headers = {"Retry-After": str(wait)}
    # Refused by role like every other 403: the same type.
    kind = "Forbidden" if isinstance(exc, AccessDenied) else type(exc).__name__
    return JSONResponse(error_body(str(exc), kind, **extra), status_for(exc), headers=headers)


def describe_validation(errors: Sequence[Any]) -> str:
    """`priority: Input should be …; tasks.0.command: …`, naming each bad field."""
    parts = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        if loc and loc[0] in ("query", "path", "header"):
            where = f"{loc[0]} parameter {'.'.join(loc[1:])}"
        else:
            where = ".".join(loc[1:] if loc and loc[0] == "body" else loc) or "body"
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "invalid request: " + "; ".join(parts)


async def _on_slotline_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SlotlineError)
    return slotline_error_response(exc)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("loc", ())[:1] == ("path",) for e in errors):
        # `GET /api/tasks/batch` reached `GET /api/tasks/{ref}` only because `batch` was
        # tried as an id: the path is `POST /api/tasks/batch`'s.
        allowed = _allowed_methods(request)
        if allowed and request.method not in allowed:
            shown = ", ".join(sorted(allowed))
            body = error_body(f"Method Not Allowed: {shown} only", "MethodNotAllowed")
            return JSONResponse(body, 405, headers={"Allow": shown})
    if any(e.get("type") == "json_invalid" for e in errors):
        ctx = next(e for e in errors if e.get("type") == "json_invalid").get("ctx") or {}
        reason = ctx.get("error", "not valid JSON")
        return JSONResponse(error_body(f"malformed JSON body: {reason}", "MalformedJSON"), 400)
    return JSONResponse(error_body(describe_validation(errors), "InvalidInput"), 422)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    kind = _HTTP_TYPES.get(exc.status_code, "HTTPError")
    headers = dict(getattr(exc, "headers", None) or {})
    allowed = _allowed_methods(request) if exc.status_code == 405 else set()
    if allowed:
        headers["Allow"] = ", ".join(sorted(allowed))
    return JSONResponse(error_body(str(exc.detail), kind), exc.status_code, headers=headers)


def _allowed_methods(request: Request) -> set[str]:
    """The methods the OpenAPI document lists for the request's path, from its most
    specific templates (`/api/tasks/batch` before `/api/tasks/{ref}`). Starlette's 405
    names the methods of the first route whose path matched, and FastAPI makes one route
    per method: `OPTIONS /api/limits` answered `Allow: GET`, hiding its `POST`."""
    app = request.app
    if not isinstance(app, FastAPI):
        return set()
    found: dict[int, set[str]] = {}
    for template, operations in app.openapi().get("paths", {}).items():
        regex, _, params = compile_path(template)
        if regex.match(request.url.path):
            methods = {m.upper() for m in operations if m.upper() in _HTTP_METHODS}
            found.setdefault(len(params), set()).update(methods)
    return found[min(found)] if found else set()


async def _on_overflow(_request: Request, exc: Exception) -> Response:
    # A number too large for the store (SQLite holds 64-bit integers): bad input, not a bug.
    return JSONResponse(error_body(f"a number is out of range: {exc}", "InvalidInput"), 422)


async def _on_unexpected(_request: Request, exc: Exception) -> Response:
    log.error("unexpected error in a request", exc_info=exc)
    return JSONResponse(
        error_body(f"internal error: {type(exc).__name__}; see the server log", "InternalError"),
        500,
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(SlotlineError, _on_slotline_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(OverflowError, _on_overflow)
    app.add_exception_handler(Exception, _on_unexpected)


class BodyLimit:
    """Refuse request bodies over `max_bytes` with 413: at once when Content-Length says
    so, otherwise as soon as the streamed body passes the cap."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = f"the request body is larger than {self.max_bytes} bytes"
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = -1
                if length < 0:
                    response = JSONResponse(
                        error_body("Content-Length is not a number", "MalformedRequest"), 400
                    )
                    await response(scope, receive, send)
                    return
                if length > self.max_bytes:
                    response = JSONResponse(error_body(too_large, "PayloadTooLarge"), 413)
                    await response(scope, receive, send)
                    return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(413, too_large)
            return message

        await self.app(scope, limited, send)
