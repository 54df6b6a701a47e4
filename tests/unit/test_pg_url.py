"""A PostgreSQL store's URL as messages show it: no password, wherever the URL holds it."""

from __future__ import annotations

import pytest

from slotline.store.pg_url import redact


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://me:s3cret@db/app", "postgresql://me:***@db/app"),
        ("postgresql://me@db/app?password=s3cret", "postgresql://me@db/app?password=***"),
        (
            "postgresql://db/app?sslmode=require&PASSWORD=s3cret&user=me",
            "postgresql://db/app?sslmode=require&PASSWORD=***&user=me",
        ),
        ("postgresql://me@db/app?schema=q", "postgresql://me@db/app?schema=q"),
    ],
)
def test_a_password_is_hidden_in_the_authority_and_in_the_query(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_a_url_without_a_host_keeps_its_form() -> None:
    url = "postgresql:///db?host=/tmp&password=x"
    assert redact(url) == "postgresql:///db?host=/tmp&password=***"
