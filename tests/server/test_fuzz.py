"""A bounded schemathesis run against the served OpenAPI document: no 5xx, and no answer
whose status code, content type or body breaks the document."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi import checks as openapi_checks

from slotline.server import ServerOptions

from .conftest import ServerFactory

# Cases per operation: about a minute on a loaded two-core machine.
MAX_EXAMPLES = 50
# Streams stay open by design (a followed log waits for its task); tested on their own.
STREAMING = {"/api/events/stream", "/api/tasks/{ref}/log"}
# Seconds an answer may take on a loaded machine (schemathesis' own default is 10).
REQUEST_TIMEOUT = 60
CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.status_code_conformance,
    openapi_checks.content_type_conformance,
    openapi_checks.response_schema_conformance,
]


@pytest.mark.timeout(300)
def test_every_operation_survives_fuzzing(make_server: ServerFactory) -> None:
    # No node runs here, so the Hephaestus routes that wait for a start (bump, restart)
    # wait their whole `compat_start_wait`: short, and well inside the client's timeout.
    server = make_server(options=ServerOptions(heartbeat=0.5, compat_start_wait=1.0))
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        if operation.path in STREAMING:
            continue

        @settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def fuzz(case: schemathesis.Case) -> None:
            case.call_and_validate(base_url=server.url, checks=CHECKS, timeout=REQUEST_TIMEOUT)

        try:
            fuzz()
        except Exception as exc:  # report every operation that fails, not only the first
            # A failure hypothesis could not replay (FlakyFailure) holds the real one inside.
            inner = "".join(f"\n  - {e!r}" for e in getattr(exc, "exceptions", ()))
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}{inner}")
    assert operations > 30
    assert not failures, "\n\n".join(failures)
