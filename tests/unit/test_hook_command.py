"""A command hook's argv template filled with an event's values: one element per
template element, never an option made of a value (the rule agent commands follow)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from slotline.config.file import load_config
from slotline.errors import InvalidInput
from slotline.store import open_store
from slotline.webhooks.config import WebhookConfig, fill_hook_command
from slotline.webhooks.deliver import _refused_for_good, deliver_until

HOOK = ["notify-send", "slotline", "{title} failed"]


def test_a_title_fills_one_element_as_it_is() -> None:
    values = {"title": "the $(rm -rf) one"}
    assert fill_hook_command(HOOK, values) == [
        "notify-send",
        "slotline",
        "the $(rm -rf) one failed",
    ]


def test_a_title_that_would_be_an_option_runs_nothing() -> None:
    with pytest.raises(InvalidInput, match="title starts with '-'"):
        fill_hook_command(HOOK, {"title": "--output=/etc/passwd"})


def test_after_a_double_dash_or_in_a_flag_a_dash_is_safe() -> None:
    assert fill_hook_command(["echo", "--", "{title}"], {"title": "-n x"})[-1] == "-n x"
    assert fill_hook_command(["x", "--title={title}"], {"title": "-n"})[-1] == "--title=-n"


def test_a_webhook_is_retried_until_delivered_unless_told_otherwise() -> None:
    assert WebhookConfig(url="http://127.0.0.1:9/", events=["task.failed"]).max_attempts is None


@pytest.mark.parametrize(
    ("status", "final"),
    [(400, True), (401, True), (410, True), (408, False), (429, False), (500, False),
     (503, False), (None, False)],
)  # fmt: skip
def test_a_webhook_answer_no_retry_changes_is_not_retried(status: int | None, final: bool) -> None:
    assert _refused_for_good(status) is final


def load_hook(tmp_path: Path, argv: list[str]) -> list[str]:
    path = tmp_path / "slotline.yaml"
    path.write_text(yaml.safe_dump({"on_event": {"task.failed": argv}}))
    return load_config(path).on_event["task.failed"][0]


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["notify-send", "slotline", "{title} failed"], "title"),
        (["notify-send", "-u", "critical", "{title}"], "title"),
        (["mail", "-s", "failed", "{user}"], "user"),
        (["logger", "{reason}"], "reason"),
        (["logger", "{agent}"], "agent"),
    ],
)
def test_a_hook_that_begins_an_argument_with_a_title_is_refused_at_load(
    tmp_path: Path, argv: list[str], field: str
) -> None:
    # A task titled `-x` would make it an option: the hook could never run for that task.
    with pytest.raises(InvalidInput) as refused:
        load_hook(tmp_path, argv)
    said = str(refused.value)
    assert f"on_event: task.failed: {{{field}}} begins an argument with no '--'" in said
    assert f"--{field}={{{field}}}" in said


@pytest.mark.parametrize(
    "argv",
    [
        ["notify-send", "--", "slotline", "{title} failed"],
        ["x", "--title={title}", "--user={user}"],
        ["x", "task {title} failed"],
        ["x", "{id}", "{event}", "{seq}", "{status}", "{workspace}"],
    ],
)
def test_a_hook_that_passes_titles_safely_loads(tmp_path: Path, argv: list[str]) -> None:
    assert load_hook(tmp_path, argv) == argv


def test_a_hook_that_cannot_run_for_a_task_is_logged_once_never_silently_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a hook template that skipped the load check (built directly) and a task
    # titled `-x` submitted once the hook listens,
    store = open_store(tmp_path / "store.db")
    hook = ["echo", "{title}"]
    name = "on_event.task.submitted.0"

    async def main() -> None:
        stop = asyncio.Event()
        notifier = asyncio.create_task(
            deliver_until(stop, store, "n1", [], {"task.submitted": [hook]}, tmp_path, 5.0)
        )
        await until_async(lambda: bool(store.notify_cursors([])), "the hook's cursor")
        store.submit({"command": ["true"], "title": "-x"})
        seq = store.last_seq()
        # when the notifier is done with its event,
        await until_async(lambda: store.notify_cursors([]).get(name, 0) >= seq, "the cursor")
        stop.set()
        await notifier

    with caplog.at_level(logging.WARNING, logger="slotline"):
        asyncio.run(main())
    # then it was not run, tried once (another try would be refused the same way), and
    # both the delivery log and the node's log say why.
    (delivery,) = store.notify_log()
    assert (delivery.hook, delivery.ok, delivery.attempt) == (name, False, 1)
    assert delivery.error is not None
    assert delivery.error.startswith("not run: title starts with '-'")
    assert any("not run: title starts with '-'" in r.getMessage() for r in caplog.records)
    store.close()


async def until_async(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
