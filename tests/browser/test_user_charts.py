"""A user's dashboard (issue 28): the charts, queue-wide totals, are withheld from a user
token unless the admin shares them (`share_totals`), and the page says so."""

from __future__ import annotations

import os

import pytest

from slotline.server import create_token

from .conftest import Login, Serve

pytestmark = pytest.mark.xdist_group("browser")


def test_a_users_charts_say_why_they_are_withheld(served: Serve, login: Login) -> None:
    user = create_token("ann", "user", served.tokens_path)
    page = login(token=user)
    page.click("[data-view=charts]")
    note = page.wait_for_selector("p.muted:has-text('share_totals')")
    assert "share_totals" in note.inner_text()
    assert page.locator(".plot canvas").count() == 0
    shot = os.environ.get("SLOTLINE_SHOTS")
    if shot:  # for a person to look at: SLOTLINE_SHOTS=/tmp/shots
        page.screenshot(path=f"{shot}/user-charts.png", full_page=True)
