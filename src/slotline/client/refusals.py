"""The exception an answer of the HTTP API stands for: the store's own, by the body's
`type` (the server sends it, `server/errors.py`), so a client raises what a store would."""

from __future__ import annotations

import httpx

from slotline import errors
from slotline.errors import AccessDenied, ServerUnavailable

_ERRORS: dict[str, type[errors.SlotlineError]] = {
    cls.__name__: cls
    for cls in (
        errors.InvalidInput,
        errors.UnknownDependency,
        errors.DependencyCycle,
        errors.NotFound,
        errors.AmbiguousId,
        errors.InvalidTransition,
        errors.MergeConflict,
        errors.StaleAttempt,
        errors.BoundExceeded,
        errors.StoreError,
        errors.SchemaTooNew,
    )
}


def response_error(response: httpx.Response) -> errors.SlotlineError:
    """The exception a failed response stands for: the store's own (by the body's `type`),
    AccessDenied for 401/403, InvalidInput for other 4xx refusals, else ServerUnavailable."""
    try:
        body = response.json()
        detail, kind = str(body["detail"]), str(body.get("type", ""))
    except (ValueError, KeyError, TypeError):
        detail, kind, body = response.text or response.reason_phrase, "", {}
    if response.status_code in (401, 403):
        return AccessDenied(f"token refused: {detail}", status_code=response.status_code)
    cls = _ERRORS.get(kind)
    if cls is not None:
        extra = {
            k: v for k, v in body.items() if k in ("status", "limit", "max", "retry_after", "files")
        }
        return cls(detail, **extra)
    if response.status_code in (400, 413, 422):
        return errors.InvalidInput(detail)
    return ServerUnavailable(f"the server answered {response.status_code}: {detail}")
