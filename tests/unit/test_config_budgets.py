"""slotline.yaml: budgets (top-level and per agent type), their errors (file, line, key),
and `serve` writing them into the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotline.cli.serve import apply_config
from slotline.config import load_config
from slotline.errors import InvalidInput
from slotline.store import open_store

BUDGETED = """\
budgets:
  - {key: global, budget: 200usd/1d}
  - {key: user, budget: 2Mtok/1h}
  - {key: label:team, value: infra, budget: $25/1d}
agents:
  claude:
    command: [claude, -p, "{prompt}"]
    budget: 50usd/1d
  codex:
    command: [codex, exec, "{prompt}"]
    budget: [10usd/1h, 500ktok/1h]
"""


def test_budgets_load_and_serve_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text(BUDGETED)
    config = load_config(path, env={})
    store = open_store(tmp_path / "q.db")
    try:
        apply_config(store, config)
        settings = store.settings()
    finally:
        store.close()

    assert {(b.key, b.value, b.budget) for b in settings.budgets} == {
        ("global", None, "200usd/1d"),
        ("user", None, "2Mtok/1h"),
        ("label:team", "infra", "25usd/1d"),
        ("agent", "claude", "50usd/1d"),
        ("agent", "codex", "10usd/1h"),
        ("agent", "codex", "500ktok/1h"),
    }


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("budgets:\n  - {key: colour, budget: 5usd/1d}\n", ":2: budgets.0.key: unknown budget key"),
        ("budgets:\n  - {key: user, budget: 5eur/1d}\n", ":2: budgets.0.budget: '5eur'"),
        ("budgets:\n  - {key: user, budget: 5usd/0s}\n", ":2: budgets.0.budget:"),
        ("budgets:\n  - {key: user, budget: 1.5tok/1h}\n", ":2: budgets.0.budget:"),
        ("agents:\n  c:\n    command: [c]\n    budget: lots\n", ":4: agents.c.budget:"),
    ],
)
def test_a_bad_budget_names_the_file_line_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as caught:
        load_config(path, env={})
    assert f"{path}{where}" in str(caught.value)
