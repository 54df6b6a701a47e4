"""A fake coding agent whose provider refuses its first run with a reset time.

Usage: fake_limited_agent.py STATE_DIR MODE. The first run (no `refused` file in
STATE_DIR yet) prints a rate-limit message and exits 1: with MODE `clock`, "Your limit
will reset at HH:MM:SS" (the node's local time, 3 seconds ahead); with MODE `minutes`,
"try again in 59 minutes". Every run appends its start time to STATE_DIR/starts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

state, mode = Path(sys.argv[1]), sys.argv[2]
with (state / "starts").open("a") as starts:
    starts.write(f"{time.time()}\n")
refused = state / "refused"
if not refused.exists():
    refused.write_text("")
    if mode == "clock":
        at = time.strftime("%H:%M:%S", time.localtime(time.time() + 3))
        print(f"Claude usage limit reached. Your limit will reset at {at}.")
    else:
        print("Rate limited: try again in 59 minutes.")
    sys.exit(1)
print("done")
