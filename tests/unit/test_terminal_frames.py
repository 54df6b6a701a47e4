"""What the terminal WebSocket accepts of a page: the sizes of its resize frames, and its
close reasons cut to what a close frame carries."""

from __future__ import annotations

from typing import Any

import pytest

from slotline.server.terminal import reason_text, size_of


@pytest.mark.parametrize(
    ("asked", "size"),
    [
        ([80, 24], (80, 24)),
        ([1, 1], (1, 1)),
        ([1000, 1000], (1000, 1000)),
        ([0, 24], None),
        ([80, 1001], None),
        ([-3, 24], None),
        ([80.5, 24], None),
        ([True, 24], None),
        (["80", "24"], None),
        ([80], None),
        ([80, 24, 1], None),
        ({"cols": 80}, None),
        (None, None),
    ],
)
def test_a_resize_is_two_whole_numbers_from_1_to_1000(asked: Any, size: Any) -> None:
    assert size_of(asked) == size


def test_a_long_reason_is_cut_to_a_close_frame_whole_characters_kept() -> None:
    short = "the run ended"
    assert reason_text(short) == short
    long = "é" * 100  # 200 bytes of UTF-8
    cut = reason_text(long)
    assert len(cut.encode()) <= 123
    assert cut == "é" * 60 + "…"
