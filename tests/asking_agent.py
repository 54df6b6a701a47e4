"""A test agent for interactive runs: it asks a yes/no question on its terminal and waits.

`asking_agent.py [QUESTION] [--exit-code-yes N] [--exit-code-no N] [--times N]`: prints
that it has started, asks QUESTION (default "Proceed? [y/n] ") without a newline, reads
one line from its terminal, prints what it got; asks N times in all (default 1), then
exits 0 if the last answer was yes, 3 on anything else (or the codes given). It refuses
to run without a terminal, as an interactive agent would.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    args = list(argv)
    codes = {"yes": 0, "no": 3}
    times = 1
    if "--times" in args:
        at = args.index("--times")
        times = int(args[at + 1])
        del args[at : at + 2]
    for name in ("yes", "no"):
        flag = f"--exit-code-{name}"
        if flag in args:
            at = args.index(flag)
            codes[name] = int(args[at + 1])
            del args[at : at + 2]
    question = args[0] if args else "Proceed? [y/n] "
    if not os.isatty(0):
        print("asking_agent: not a terminal", file=sys.stderr)
        return 2
    print(f"asking_agent started in {os.getcwd()} (TERM={os.environ.get('TERM')})", flush=True)
    answer = ""
    for _ in range(times):
        try:
            answer = input(question)
        except EOFError:
            print("asking_agent: the terminal closed", flush=True)
            return 4
        print(f"asking_agent got {answer!r}", flush=True)
    return codes["yes"] if answer.strip().lower() in ("y", "yes") else codes["no"]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
