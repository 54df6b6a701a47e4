"""The environment a test starts slotline processes with: the test's own without the
`SLOTLINE_*` variables of whoever runs the suite, but for `SLOTLINE_PORTABLE`, which the
second CI pass sets (scripts/check) and every node the suite starts must see."""

from __future__ import annotations

import os

from slotline.runner.capabilities import PORTABLE_VARIABLE


def without_slotline_variables() -> dict[str, str]:
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("SLOTLINE_") or name == PORTABLE_VARIABLE
    }
