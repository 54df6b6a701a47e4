"""A fake coding agent that goes quiet: it prints a line (with `--ask`, then a "waiting
for input" prompt), prints nothing until the file named by its first argument exists,
then prints "back", and exits once that file's name with `.end` added exists."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def wait_for(path: Path) -> None:
    while not path.exists():
        time.sleep(0.05)


def main() -> None:
    go = Path(sys.argv[1])
    print("working on it", flush=True)
    if "--ask" in sys.argv:
        print("Allow this edit? waiting for input", flush=True)
    wait_for(go)
    print("back", flush=True)
    wait_for(Path(f"{go}.end"))
    print("done", flush=True)


if __name__ == "__main__":
    main()
