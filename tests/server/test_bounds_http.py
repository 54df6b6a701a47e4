"""Over HTTP, a number out of bounds is a 422 whose detail says the bound in words."""

from __future__ import annotations

import httpx
import pytest


@pytest.mark.parametrize(
    ("method", "path", "body", "said"),
    [
        (
            "POST",
            "/api/tasks",
            {"command": ["true"], "timeout": 1e20},
            "timeout: must be more than 0 seconds and at most 10 years, got 1e+20",
        ),
        (
            "POST",
            "/api/tasks",
            {"command": ["true"], "max_attempts": 1000},
            "max_attempts: must be between 1 and 100, got 1000",
        ),
        (
            "POST",
            "/api/limits",
            {"limits": [{"key": "agent", "value": "a", "max": 2**63}]},
            "limits.0.max: must be between 0 and 1,000,000,000, got 9223372036854775808",
        ),
        (
            "GET",
            "/api/tasks?offset=" + "9" * 30,
            None,
            "query parameter offset: is too large, got 999999999999999999999...",
        ),
        ("GET", "/api/tasks?limit=0", None, "query parameter limit: must be between 1 and"),
    ],
)
def test_a_number_out_of_bounds_is_a_422_saying_the_bound_in_words(
    http: httpx.Client, method: str, path: str, body: object, said: str
) -> None:
    refused = http.request(method, path, json=body)
    assert refused.status_code == 422, refused.text
    assert said in refused.json()["detail"]
    assert "<=" not in refused.json()["detail"]
