"""`python -m slotline`: the same as the `slotline` command."""

from __future__ import annotations

from slotline.cli import main

if __name__ == "__main__":
    main()
