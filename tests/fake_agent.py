"""A fake coding agent for tests: prints Claude-style JSON results or aider-style lines.

    python fake_agent.py [--resume SESSION] [--session ID] [--style json|stream|aider]
                         [--cost C] [--tokens-in N] [--tokens-out N] [--wait FILE]
                         [--edit FILE] -- PROMPT

It appends "PROMPT (resumed SESSION)" to `--edit` (in its working directory), waits for
`--wait` to exist if given, then prints its result: one JSON object at the end (`json`,
as Claude's `--output-format json`: nothing before it, so a run killed first printed no
session id), JSON lines with the session id first (`stream`, as `--output-format
stream-json`: an `init` line at once), or aider's "Tokens: … sent, … received. Cost:
$… message" line (`aider`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--resume")
    parser.add_argument("--session", default="sess-1")
    parser.add_argument("--style", default="json")
    parser.add_argument("--cost", default="0.12")
    parser.add_argument("--tokens-in", default="1234")
    parser.add_argument("--tokens-out", default="56")
    parser.add_argument("--wait")
    parser.add_argument("--edit")
    parser.add_argument("prompt")
    args = parser.parse_args()
    session = args.resume or args.session
    if args.edit:
        with open(args.edit, "a") as out:
            out.write(f"{args.prompt} (resumed {args.resume})\n")
    if args.style == "stream":
        init = {"type": "system", "subtype": "init", "session_id": session}
        print(json.dumps(init), flush=True)
    if args.wait:
        while not os.path.exists(args.wait):
            time.sleep(0.05)
    usage = {"input_tokens": int(args.tokens_in), "output_tokens": int(args.tokens_out)}
    result = {
        "type": "result",
        "total_cost_usd": float(args.cost),
        "usage": usage,
        "session_id": session,
        "result": f"done: {args.prompt}",
    }
    if args.style == "aider":
        print(
            f"Tokens: {int(args.tokens_in):,} sent, {args.tokens_out} received. "
            f"Cost: ${args.cost} message, $9.99 session."
        )
    elif args.style == "stream":
        print(json.dumps({"type": "assistant", "message": "working"}))
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
