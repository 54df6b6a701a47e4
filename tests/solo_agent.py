"""An agent that proves it runs alone: `solo_agent.py KEY FOLDER SECONDS`.

It holds a non-blocking `flock` on `FOLDER/KEY.lock` for its whole life and appends one
line to `FOLDER/ledger`: `start KEY PID TIME ATTEMPT_ID`, or `DOUBLE …` when the lock is
already held, that is when another process of the same task lives at this instant (the
kernel releases the lock when a process dies, however it dies, so the check cannot miss
an overlap). It then works SECONDS and appends `done …`. Only the standard library: it
starts fast under a keeper.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time


def append(ledger: str, word: str, key: str) -> None:
    attempt = os.environ.get("SLOTLINE_ATTEMPT_ID", "-")
    line = f"{word} {key} {os.getpid()} {time.time()!r} {attempt}\n"
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())  # one write with O_APPEND: lines never interleave
    finally:
        os.close(fd)


def main(key: str, folder: str, seconds: str) -> None:
    ledger = os.path.join(folder, "ledger")
    lock = os.open(os.path.join(folder, f"{key}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        append(ledger, "start", key)
    except BlockingIOError:
        append(ledger, "DOUBLE", key)
    print(f"{key} working", flush=True)
    time.sleep(float(seconds))
    append(ledger, "done", key)


if __name__ == "__main__":
    main(*sys.argv[1:4])
