"""What a coding agent's result says, through a real node and the CLI, with fake agents
that print Claude's stream-json and Codex's JSON lines: a follow-up costs (Claude) and
counts the tokens (Codex) of what it alone spent although the agent prints its session's
running totals; its command shows the session it continued; an agent refused its tools
is flagged (show, stats, the event), not passed off as a plain success."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from slotline.models import Status
from slotline.store import Store
from waiting import until

from .conftest import Run, Serve, ok

# Claude Code's stream-json, as 2.1.x prints it: an `init` line first, the `result` last
# with the session's running total (`total_cost_usd`: every process of the session so
# far, kept in LEDGER by session id), this process's tokens, and the tool uses it was
# refused (a prompt `deny:Write,Edit` is refused those).
FAKE_CLAUDE = """import json, sys
ledger, cost, session, prompt = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
print(json.dumps({"type": "system", "subtype": "init", "session_id": session}), flush=True)
try:
    totals = json.load(open(ledger))
except FileNotFoundError:
    totals = {}
totals[session] = round(totals.get(session, 0.0) + cost, 6)
json.dump(totals, open(ledger, "w"))
tools = prompt[len("deny:"):].split(",") if prompt.startswith("deny:") else []
denials = [{"tool_name": t, "tool_use_id": f"toolu_{i}", "tool_input": {"file_path": "x"}}
           for i, t in enumerate(tools)]
print(json.dumps({
    "type": "result", "subtype": "success", "is_error": False, "num_turns": 2,
    "result": "done", "session_id": session, "total_cost_usd": totals[session],
    "usage": {"input_tokens": 1000, "output_tokens": 50},
    "permission_denials": denials,
}))
"""

# Codex CLI's `exec --json`, as 0.171 prints it: `thread.started` with the session id
# first, `turn.completed` last with the tokens of the whole session (every run of it so
# far, kept in LEDGER by session id).
FAKE_CODEX = """import json, sys
ledger, used_in, used_out, session = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print(json.dumps({"type": "thread.started", "thread_id": session}), flush=True)
try:
    totals = json.load(open(ledger))
except FileNotFoundError:
    totals = {}
before = totals.get(session, [0, 0])
totals[session] = [before[0] + used_in, before[1] + used_out]
json.dump(totals, open(ledger, "w"))
used = {"input_tokens": totals[session][0], "output_tokens": totals[session][1]}
print(json.dumps({"type": "turn.completed", "usage": used}))
"""


@pytest.fixture
def agents(tmp_path: Path) -> None:
    """slotline.yaml with a `claude` and a `codex` type as the docs declare their usage
    rules: a first Claude run spends $0.104, each resumed one $0.106 (1000 tokens in, 50
    out each); a first Codex run 500 tokens in and 29 out, each resumed one 900 and 41."""
    claude, codex = tmp_path / "fake_claude.py", tmp_path / "fake_codex.py"
    claude.write_text(FAKE_CLAUDE)
    codex.write_text(FAKE_CODEX)
    run_claude = [sys.executable, str(claude), str(tmp_path / "claude-sessions.json")]
    run_codex = [sys.executable, str(codex), str(tmp_path / "codex-sessions.json")]
    types = {
        "claude": {
            "command": [*run_claude, "0.104", "sess-7", "{prompt}"],
            "resume": [*run_claude, "0.106", "{session_id}", "{prompt}"],
            "usage": {
                "json": {
                    "cost_usd": "total_cost_usd",
                    "input_tokens": "usage.input_tokens",
                    "output_tokens": "usage.output_tokens",
                    "session_id": "session_id",
                    "permission_denials": "permission_denials",
                },
                "session_totals": ["cost_usd"],
            },
        },
        "codex": {
            "command": [*run_codex, "500", "29", "thread-3", "{prompt}"],
            "resume": [*run_codex, "900", "41", "{session_id}", "{prompt}"],
            "usage": {
                "json": {"input_tokens": "usage.input_tokens",
                         "output_tokens": "usage.output_tokens"},
                "regex": {"session_id": '"thread_id": "([^"]+)"'},
                "session_totals": ["input_tokens", "output_tokens"],
            },
        },
    }  # fmt: skip
    (tmp_path / "slotline.yaml").write_text(json.dumps({"agents": types}))


def ended(store: Store, task_id: str) -> dict[str, Any]:
    task = until(lambda: (t := store.get(task_id)).status.terminal and t, what=f"{task_id} ended")
    assert task.status is Status.SUCCEEDED, task.status_reason
    found: dict[str, Any] = task.to_dict()
    return found


@pytest.mark.usefixtures("agents")
def test_a_followup_costs_what_it_spent_and_shows_the_session_it_continued(
    cli: Run, serve: Serve, store: Store
) -> None:
    # Given a finished run of a session that spent $0.104
    serve()
    first = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "write the notes"))
    assert ended(store, first["id"])["attempts"][0]["usage"]["cost_usd"] == 0.104

    # When a follow-up is queued (its command shows which session it will continue),
    ok(cli("--json", "pause"))
    queued = ok(cli("--json", "followup", first["id"], "--prompt", "now add tests"))
    placeholder = f"<session of {first['id'][:8]}>"
    assert placeholder in queued["command"]
    assert placeholder in cli("show", queued["id"]).out
    ok(cli("--json", "resume"))
    # and a second one after it
    second = ok(cli("--json", "followup", first["id"], "--prompt", "and the docs"))

    # Then each run costs what it alone spent, though Claude printed the running total,
    # and its tokens (this process's own, as Claude prints them) are taken as printed
    done = ended(store, queued["id"])
    (attempt,) = done["attempts"]
    assert attempt["usage"]["session_totals"] == {"cost_usd": pytest.approx(0.21)}
    assert attempt["usage"]["cost_usd"] == pytest.approx(0.106)
    assert (attempt["usage"]["input_tokens"], attempt["usage"]["output_tokens"]) == (1000, 50)
    (last,) = ended(store, second["id"])["attempts"]
    assert last["usage"]["session_totals"] == {"cost_usd": pytest.approx(0.316)}
    assert last["usage"]["cost_usd"] == pytest.approx(0.106)
    spend = ok(cli("--json", "stats"))["spend"]
    assert spend["total"]["cost_usd"] == pytest.approx(0.316)
    assert spend["total"]["input_tokens"] == 3000
    # and the follow-up's command is the one it ran, with the session filled in
    assert done["command"][-2:] == ["sess-7", "now add tests"]
    shown = cli("show", queued["id"]).out
    assert "sess-7" in shown
    assert "<session of" not in shown
    assert "{session_id}" not in shown


@pytest.mark.usefixtures("agents")
def test_a_followup_counts_the_tokens_it_used_when_the_agent_prints_the_sessions(
    cli: Run, serve: Serve, store: Store
) -> None:
    # Given a finished Codex run of a session that used 500 tokens in and 29 out
    serve()
    first = ok(cli("--json", "submit", "--agent", "codex", "--prompt", "write the notes"))
    (one,) = ended(store, first["id"])["attempts"]
    assert one["usage"] == {
        "cost_usd": None, "input_tokens": 500, "output_tokens": 29,
        "session_totals": {"input_tokens": 500, "output_tokens": 29},
    }  # fmt: skip

    # When two follow-ups continue the session, Codex printing its running totals
    followup = ok(cli("--json", "followup", first["id"], "--prompt", "now add tests"))
    (two,) = ended(store, followup["id"])["attempts"]
    again = ok(cli("--json", "followup", first["id"], "--prompt", "and the docs"))
    (three,) = ended(store, again["id"])["attempts"]

    # Then each counts only the tokens it used, as whole numbers, and keeps the totals
    assert two["session_id"] == three["session_id"] == "thread-3"
    assert two["usage"] == {
        "cost_usd": None, "input_tokens": 900, "output_tokens": 41,
        "session_totals": {"input_tokens": 1400, "output_tokens": 70},
    }  # fmt: skip
    assert three["usage"]["session_totals"] == {"input_tokens": 2300, "output_tokens": 111}
    assert (three["usage"]["input_tokens"], three["usage"]["output_tokens"]) == (900, 41)
    assert "900 in, 41 out" in cli("show", followup["id"]).out
    spend = ok(cli("--json", "stats"))["spend"]
    assert (spend["total"]["input_tokens"], spend["total"]["output_tokens"]) == (2300, 111)
    assert isinstance(spend["total"]["input_tokens"], int)


@pytest.mark.usefixtures("agents")
def test_an_agent_refused_its_tools_is_flagged_and_counted(
    cli: Run, serve: Serve, store: Store
) -> None:
    # Given a run whose agent was refused two tool uses, and one refused none
    serve()
    refused = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "deny:Write,Edit"))
    clean = ok(cli("--json", "submit", "--agent", "claude", "--prompt", "all allowed"))

    # Then the refused one succeeded (the agent exited 0) but says so everywhere
    flagged = ended(store, refused["id"])
    message = (
        "agent was refused 2 tool uses: Write, Edit — its permission mode may not allow "
        "them (see docs/coding-agents.md)"
    )
    assert flagged["status_reason"] == message
    assert flagged["attempts"][0]["denied_tools"] == ["Write", "Edit"]
    shown = cli("show", refused["id"]).out
    assert re.search(r"refused\s+agent was refused 2 tool uses: Write, Edit", shown), shown
    assert "REFUSED 2 tool uses" in shown
    events = ok(cli("--json", "events"))
    denied = [e for e in events if e["kind"] == "denied"]
    assert [(e["task_id"], e["data"]["count"], e["data"]["tools"]) for e in denied] == [
        (refused["id"], 2, ["Write", "Edit"])
    ]
    # while the other is a plain success
    plain = ended(store, clean["id"])
    assert (plain["status_reason"], plain["attempts"][0]["denied_tools"]) == (None, [])
    shown_clean = cli("show", clean["id"]).out
    assert "agent was refused" not in shown_clean
    assert "REFUSED" not in shown_clean
    # and stats count the refused runs, in all and per agent type
    spend = ok(cli("--json", "stats"))["spend"]
    assert spend["total"]["denied"] == 1
    assert [(r["key"], r["runs"], r["denied"]) for r in spend["agent"]] == [("claude", 2, 1)]
    assert "REFUSED TOOLS" in cli("stats").out
