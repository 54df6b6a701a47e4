"""Ranks: order keys within a priority band that let one task move without renumbering others.

A rank is a decimal fraction written without "0." and without trailing zeros
("5" is 0.5, "0001" is 0.0001). For such strings the byte order equals the numeric
order, so the store can sort on them, and there is always room between two ranks.
"""

from __future__ import annotations

SEQ_WIDTH = 15


def _normalize(digits: str) -> str:
    stripped = digits.rstrip("0")
    if not stripped:
        raise ValueError("a rank must be greater than zero")
    return stripped


def seq_rank(seq: int) -> str:
    """The rank given at enqueue: larger sequence numbers sort later."""
    if not 0 < seq < 10**SEQ_WIDTH:
        raise ValueError(f"sequence {seq} out of range")
    return _normalize(f"{seq:0{SEQ_WIDTH}d}")


def between(lo: str | None, hi: str | None) -> str:
    """A rank strictly between `lo` and `hi` (None means 0 and 1 respectively)."""
    lo_digits = lo or ""
    hi_digits = hi or ""
    if lo is not None and hi is not None and not lo < hi:
        raise ValueError(f"ranks out of order: {lo!r} !< {hi!r}")
    width = max(len(lo_digits), len(hi_digits)) + 1
    while True:
        low = int(lo_digits.ljust(width, "0")) if lo_digits else 0
        high = int(hi_digits.ljust(width, "0")) if hi is not None else 10**width
        if high - low >= 2:
            return _normalize(f"{(low + high) // 2:0{width}d}")
        width += 1
