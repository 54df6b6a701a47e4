"""The CLI of idempotency keys, delayed tasks and recurring schedules, run for real."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from slotline.clock import iso
from slotline.store import Store
from waiting import until

from .conftest import Run, Serve, ok, submit

# -- idempotency keys ---------------------------------------------------------------------


def test_a_second_submit_with_a_key_says_it_is_the_existing_task(cli: Run) -> None:
    first = cli("submit", "--key", "fix-7", "--", "echo", "one")
    again = cli("submit", "--key", "fix-7", "--", "echo", "one")

    assert re.fullmatch(r"submitted [0-9a-f]{8}: queued, position 1 \(NEXT UP\).*\n", first.out)
    assert again.code == 0
    short = first.out.split()[1].rstrip(":")
    assert again.out.startswith(f"existing task (key 'fix-7') {short}: queued")
    assert len(ok(cli("ls", "--json"))) == 1


def test_submit_json_says_whether_the_task_was_deduplicated(cli: Run) -> None:
    first = submit(cli, "--key", "k")
    again = submit(cli, "--key", "k", "--dedup-window", "10m")

    assert (first["deduplicated"], again["deduplicated"]) == (False, True)
    assert again["id"] == first["id"]
    assert again["key"] == "k"


def test_a_dedup_window_without_a_key_is_a_usage_error(cli: Run) -> None:
    result = cli("submit", "--dedup-window", "10m", "--", "true")

    assert result.code == 2
    assert "--dedup-window needs --key" in result.error_line()


# -- delayed tasks ------------------------------------------------------------------------


def test_a_delayed_task_shows_its_start_time(cli: Run) -> None:
    result = cli("submit", "--in", "10m", "--", "echo", "later")

    assert result.code == 0
    # (not NEXT UP: a task that waits for its start time is not expected to start next)
    assert re.search(r"queued, position 1, not before \S+ \S+Z \(in 9m\)", result.out)
    task = ok(cli("ls", "--json"))[0]
    assert task["run_at"] is not None
    assert "start at" in cli("show", task["id"]).out


def test_at_takes_a_utc_time_and_refuses_a_past_one(cli: Run) -> None:
    task = submit(cli, "--at", "2999-01-01T00:00:00Z")
    past = cli("submit", "--at", "2001-01-01T00:00", "--", "true")
    both = cli("submit", "--at", "12:00", "--in", "5m", "--", "true")
    garbled = cli("submit", "--at", "soon", "--", "true")

    assert task["run_at"] == "2999-01-01T00:00:00Z"
    assert past.code == 1
    assert "in the past" in past.error_line()
    assert both.code == 2
    assert "--at or --in" in both.error_line()
    assert garbled.code == 2
    assert "HH:MM" in garbled.error_line()
    assert len(ok(cli("ls", "--json"))) == 1


def test_at_takes_a_time_without_offset_as_local_and_submits_epoch_seconds(cli: Run) -> None:
    # The API refuses an ISO time without an offset; the CLI knows this machine's zone
    task = submit(cli, "--at", "2999-01-01T00:00")

    assert task["run_at"] == iso(datetime(2999, 1, 1).timestamp())


# -- schedules ----------------------------------------------------------------------------


def test_schedule_add_ls_pause_resume_rm(cli: Run) -> None:
    added = cli("schedule", "add", "nightly", "--cron", "0 3 * * *", "-p", "low", "--",
                "echo", "-n", "hi")  # fmt: skip
    assert added.code == 0, added.err
    assert added.out.startswith("schedule nightly: At 03:00 every day (UTC), next at ")

    (listed,) = ok(cli("schedule", "ls", "--json"))
    assert listed["task"]["command"] == ["echo", "-n", "hi"]
    assert (listed["cron"], listed["overlap"], listed["paused"]) == ("0 3 * * *", "skip", False)
    assert "nightly" in cli("schedule", "ls").out

    assert ok(cli("schedule", "pause", "nightly", "--json"))["paused"] is True
    assert "paused" in cli("schedule", "ls").out
    assert cli("schedule", "resume", "nightly").out.startswith("schedule nightly resumed")
    assert cli("schedule", "rm", "nightly").out == "schedule nightly removed\n"
    assert ok(cli("schedule", "ls", "--json")) == []


def test_schedule_errors_are_one_line(cli: Run) -> None:
    cli("schedule", "add", "s", "--cron", "0 * * * *", "--", "true")

    bad_cron = cli("schedule", "add", "x", "--cron", "every day", "--", "true")
    taken = cli("schedule", "add", "s", "--cron", "0 * * * *", "--", "true")
    unknown = cli("schedule", "pause", "nope")
    no_command = cli("schedule", "add", "y", "--cron", "0 * * * *")

    assert (bad_cron.code, taken.code, unknown.code, no_command.code) == (1, 1, 1, 2)
    assert "cron 'every day'" in bad_cron.error_line()
    assert "--replace" in taken.error_line()
    assert "no schedule named 'nope'" in unknown.error_line()
    assert ok(cli("schedule", "ls", "--json"))[0]["name"] == "s"


def test_serve_fires_the_schedules_of_slotline_yaml(
    cli: Run, serve: Serve, store: Store, tmp_path: Path
) -> None:
    # Given a schedule declared in slotline.yaml, ticking every second, tasks held
    (tmp_path / "slotline.yaml").write_text(
        "schedules:\n"
        "  every-second:\n"
        '    cron: "* * * * * *"\n'
        "    overlap: skip\n"
        "    task: {command: [echo, tick], hold: true}\n"
    )

    # When a node runs
    serve()

    # Then the schedule is the file's, and its tick submitted a task
    (listed,) = ok(cli("schedule", "ls", "--json"))
    assert (listed["name"], listed["origin"]) == ("every-second", "config")
    until(store.list_tasks, what="a task of the schedule")
    (task,) = store.list_tasks()
    assert (task.schedule, task.title) == ("every-second", "echo tick")
