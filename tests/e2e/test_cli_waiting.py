"""`status`, `ls`, `show` and `submit` say why a task waits, which task is NEXT UP, what
an estimate rests on, and that nothing can start with max_concurrent 0 (issue 27)."""

from __future__ import annotations

import re
from pathlib import Path

from slotline.store import Store

from .conftest import Run, claim_one, ok, submit


def next_up_line(out: str) -> str:
    (line,) = [line for line in out.splitlines() if "NEXT UP" in line]
    return line


def test_status_says_why_each_task_waits_and_skips_a_delayed_one_for_next_up(
    cli: Run, store: Store
) -> None:
    # Given a node on the store, one slot taken, and behind it a task delayed by half an
    # hour, then a plain one…
    store.register_node("test-node")
    submit(cli, "--title", "first", "--", "true")
    claim_one(store)
    submit(cli, "--title", "delayed", "--in", "30m", "--", "true")
    plain = submit(cli, "--title", "plain", "--", "true")
    out = cli("status").out
    # …the delayed one is not NEXT UP, the plain one is, and each says why it waits.
    assert "plain" in next_up_line(out)
    assert "WHY NOT NOW" in out
    assert "ETA START" in out
    assert re.search(r"delayed .*not before", out)
    assert re.search(r"plain .*the 1 slot is taken", out)
    # `ls` says it too, and --json gives the reason with an exact ISO time.
    assert re.search(r"delayed .*not before", cli("ls").out)
    found = {t["title"]: t for t in ok(cli("--json", "ls"))}
    reason = found["delayed"]["waiting_reason"]
    assert reason["kind"] == "start_time"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", reason["until"])
    assert found["plain"]["waiting_reason"]["kind"] == "slots"
    assert ok(cli("--json", "status"))["next_up"] == plain["id"]


def test_show_says_why_and_that_an_end_is_unknown_without_any_finished_run(
    cli: Run, store: Store
) -> None:
    store.register_node("test-node")
    running = submit(cli, "--agent", "claude", "--", "true")
    claim_one(store)
    behind = submit(cli, "--agent", "claude", "--", "true")
    shown = cli("show", behind["id"]).out
    assert re.search(r"waiting\s+the 1 slot is taken", shown)
    assert re.search(r"eta start\s+unknown", shown)
    assert re.search(r"no estimate\s+starts after a run whose length is unknown", shown)
    ended = cli("show", running["id"]).out
    assert re.search(r"eta end\s+unknown", ended)
    assert "no run of agent claude has finished yet" in ended


def test_without_a_node_submit_says_nothing_serves_the_store(cli: Run) -> None:
    result = cli("submit", "--", "true")
    assert "no live node serves this store: start one with `slotline serve`" in result.out


def test_max_concurrent_zero_warns_and_status_says_no_slots(
    cli: Run, store: Store, tmp_path: Path
) -> None:
    store.register_node("test-node")
    changed = cli("limits", "--set", "max_concurrent=0")
    assert changed.code == 0
    assert "warning: max_concurrent is 0" in changed.err
    task = submit(cli, "--", "true")
    out = cli("status").out
    assert "NO SLOTS: max_concurrent is 0" in out
    assert "AT CAPACITY" not in out
    assert "max_concurrent is 0: no task starts until it is raised" in cli("show", task["id"]).out
    # A slotline.yaml that sets it says so when it is read.
    (tmp_path / "slotline.yaml").write_text("max_concurrent: 0\n")
    assert "warning: max_concurrent is 0" in cli("config").err


def test_over_the_limit_status_says_one_thing(cli: Run, store: Store) -> None:
    submit(cli, "--", "true")
    later = submit(cli, "--", "true")
    claim_one(store)
    ok(cli("--json", "bump", later["id"]))
    claim_one(store)
    out = cli("status").out
    assert "OVER LIMIT: 2/1 running" in out
    assert "AT CAPACITY" not in out


def test_show_and_submit_say_next_up_of_the_task_status_calls_next_up(
    cli: Run, store: Store
) -> None:
    # Given two slots, a claude limit of 1 taken by a run, a claude task first in line
    # (it waits for the limit) and a plain task behind it, with a slot free for it…
    store.register_node("test-node")
    cli("limits", "--set", "max_concurrent=2", "--set", "agent[claude]=1")
    submit(cli, "--agent", "claude", "--expected-duration", "60", "--", "true")
    claim_one(store)
    claude = submit(cli, "--agent", "claude", "--expected-duration", "60", "--", "true")
    said = cli("submit", "--expected-duration", "60", "--", "true").out
    plain = ok(cli("--json", "status"))["next_up"]
    # …status, submit and show agree: the plain task is NEXT UP, though second in line.
    assert "position 2 (NEXT UP)" in said
    assert plain != claude["id"]
    assert "NEXT UP" in cli("show", plain).out
    assert "NEXT UP" not in cli("show", claude["id"]).out


def test_status_says_one_state_of_capacity_and_its_json_names_it(cli: Run, store: Store) -> None:
    # Given one slot taken, and a task started now past it…
    store.register_node("test-node")
    cli("limits", "--set", "max_concurrent=1")
    submit(cli, "--expected-duration", "60", "--", "true")
    claim_one(store)
    bumped = submit(cli, "--", "true")
    cli("bump", bumped["id"])
    claim_one(store)
    # …status says OVER LIMIT, not also AT CAPACITY, and --json says over_limit.
    out = cli("status").out
    assert "OVER LIMIT: 2/1 running" in out
    assert "AT CAPACITY" not in out
    assert ok(cli("--json", "status"))["capacity"] == "over_limit"
    cli("limits", "--set", "max_concurrent=0")
    assert ok(cli("--json", "status"))["capacity"] == "no_slots"
