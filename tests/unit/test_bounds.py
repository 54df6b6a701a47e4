"""Bounds are said as a person reads them, the same wherever a number is refused."""

from __future__ import annotations

import pytest

from slotline.bounds import COUNT, MEMORY_MB, ORDINAL, SECONDS, Range, check_number
from slotline.errors import InvalidInput


@pytest.mark.parametrize(
    ("bounds", "words"),
    [
        (SECONDS, "more than 0 seconds and at most 10 years"),
        (COUNT, "between 0 and 1,000,000,000"),
        (ORDINAL, "at least 1"),
        (MEMORY_MB, "between 1 MiB and 16 TiB"),
        (Range(1, 86_400, unit="seconds"), "between 1 second and 1 day"),
        (Range(0.1, 600, unit="seconds"), "between 0.1 seconds and 10 minutes"),
        (Range(1024, 2**50, whole=True, unit="bytes"), "between 1 KiB and 1 PiB"),
    ],
)
def test_a_range_is_said_in_words(bounds: Range, words: str) -> None:
    assert bounds.words() == words


def test_a_value_out_of_range_is_refused_naming_it_and_the_range() -> None:
    with pytest.raises(InvalidInput) as caught:
        SECONDS.check("timeout", 1e20)
    assert (
        str(caught.value) == "timeout must be more than 0 seconds and at most 10 years, got 1e+20"
    )
    with pytest.raises(InvalidInput) as caught:
        check_number("max_concurrent", 10**10, whole=True, minimum=0, maximum=1_000_000_000)
    assert str(caught.value) == (
        "max_concurrent must be between 0 and 1,000,000,000, got 10000000000"
    )


def test_past_a_bound_no_person_would_name_is_too_large() -> None:
    assert ORDINAL.refusal(2**70) == "is too large, got 1180591620717411303424"
    assert ORDINAL.refusal(0) == "must be at least 1, got 0"
    assert ORDINAL.refusal(2**53 - 1) is None


@pytest.mark.parametrize("value", ["x", "1.5", float("nan"), float("inf"), True, None])
def test_what_is_not_a_whole_number_is_refused(value: object) -> None:
    with pytest.raises(InvalidInput, match=r"^count must be a (whole|finite) number"):
        COUNT.check("count", value)
