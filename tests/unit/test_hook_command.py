"""A command hook's argv template filled with an event's values: one element per
template element, never an option made of a value (the rule agent commands follow)."""

from __future__ import annotations

import pytest

from slotline.config_notify import WebhookConfig, fill_hook_command
from slotline.errors import InvalidInput
from slotline.runner.notify import _refused_for_good

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
