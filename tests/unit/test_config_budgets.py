"""slotline.yaml: budgets (top-level and per agent type), their errors (file, line, key),
and `serve` writing them into the store."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from slotline.cli.apply import apply_config
from slotline.config.file import load_config
from slotline.errors import InvalidInput
from slotline.store import open_store
from slotline.store.settings import Settings

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


def test_the_file_owns_its_budgets_and_rates_and_run_time_ones_stay(tmp_path: Path) -> None:
    # Given: a file with two windows of one unit, a rate, and rules set at run time
    path = tmp_path / "slotline.yaml"
    path.write_text(
        "budgets:\n"
        "  - {key: user, budget: 10usd/1h}\n"
        "  - {key: user, budget: 100usd/1d}\n"
        "rates:\n"
        "  - {key: user, rate: 5/1m}\n"
        "agents:\n"
        "  claude:\n"
        "    command: [claude, -p, '{prompt}']\n"
        "    budget: [1usd/1h, 20usd/1d]\n"
        "    rate: 10/1m\n"
    )
    store = open_store(tmp_path / "q.db")
    try:
        apply_config(store, load_config(path, env={}))
        store.set_budget("global", None, 500, "1d")  # at run time: kept
        store.set_rate("workspace", None, 3, "1m")  # at run time: kept
        store.set_budget("agent", "claude", 2, "1h")  # a declared one changed at run time
        first = store.settings()

        # When: the file drops a window, the agent's budgets and its rate, and serve runs again
        path.write_text(
            "budgets:\n"
            "  - {key: user, budget: 10usd/1h}\n"
            "agents:\n"
            "  claude:\n"
            "    command: [claude, -p, '{prompt}']\n"
        )
        apply_config(store, load_config(path, env={}))
        told = [e.seq for e in store.events() if e.kind in ("budget", "rate")]
        apply_config(store, load_config(path, env={}))  # unchanged: nothing to tell
        second = store.settings()
        assert [e.seq for e in store.events() if e.kind in ("budget", "rate")] == told
    finally:
        store.close()

    assert {(b.key, b.value, b.budget, b.origin) for b in first.budgets} == {
        ("user", None, "10usd/1h", "config"),
        ("user", None, "100usd/1d", "config"),
        ("agent", "claude", "2usd/1h", "api"),
        ("agent", "claude", "20usd/1d", "config"),
        ("global", None, "500usd/1d", "api"),
    }
    # Then: what the file no longer declares is gone; what was set at run time stays
    assert {(b.key, b.value, b.budget) for b in second.budgets} == {
        ("user", None, "10usd/1h"),
        ("agent", "claude", "2usd/1h"),
        ("global", None, "500usd/1d"),
    }
    assert {(r.key, r.value, r.rate) for r in second.rates} == {("workspace", None, "3/1m")}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "limits:\n  - {key: agent, value: claude, max: 2}\n"
            "agents:\n  claude: {command: [claude, '{prompt}'], max_concurrent: 3}\n",
            "limits[0] and agents.claude.max_concurrent give the limit of agent=claude two "
            "values (2 and 3); keep one",
        ),
        (
            "limits:\n  - {key: workspace, value: /w/proj/, max: 1}\n"
            "  - {key: workspace, value: /w/./proj, max: 2}\n",
            "limits[0] and limits[1] give the limit of workspace=/w/proj two values (1 and 2)",
        ),
        (
            "rates:\n  - {key: agent, rate: 20/1m}\n  - {key: agent, rate: 30/1m}\n",
            "rates[0] and rates[1] give the rate of agent=each value two values",
        ),
        (
            "budgets:\n  - {key: agent, value: claude, budget: 10usd/1h}\n"
            "agents:\n  claude:\n    command: [claude, '{prompt}']\n"
            "    budget: [100usd/1d, 20usd/60m]\n",
            "budgets[0] and agents.claude.budget[1] give the budget of agent=claude in usd "
            "per 1h two values (10usd/1h and 20usd/60m)",
        ),
    ],
)
def test_a_limit_rate_or_budget_window_given_two_values_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=re.escape(message)):
        load_config(path, env={})


def test_the_same_value_twice_and_other_windows_of_one_key_load(tmp_path: Path) -> None:
    path = tmp_path / "slotline.yaml"
    path.write_text(
        "limits:\n  - {key: agent, value: claude, max: 2}\n"
        "rates:\n  - {key: agent, value: claude, rate: 20/1m}\n"
        "agents:\n  claude:\n    command: [claude, '{prompt}']\n    max_concurrent: 2\n"
        "    rate: 20/60s\n    budget: [10usd/1h, 100usd/1d, 2Mtok/1h]\n"
    )
    config = load_config(path, env={})
    assert config.agents["claude"].budget == ["10usd/1h", "100usd/1d", "2Mtok/1h"]


def test_the_file_owns_its_per_key_limits_and_run_time_ones_stay(tmp_path: Path) -> None:
    # Given: a file with a per-key limit and an agent type's cap, and limits set at run time
    path = tmp_path / "slotline.yaml"
    path.write_text(
        "limits:\n"
        "  - {key: workspace, max: 1}\n"
        "  - {key: user, value: ann, max: 2}\n"
        "agents:\n"
        "  claude: {command: [claude, -p, '{prompt}'], max_concurrent: 3}\n"
        "  codex: {command: [codex, exec, '{prompt}'], max_concurrent: 4}\n"
    )
    store = open_store(tmp_path / "q.db")
    try:
        apply_config(store, load_config(path, env={}))
        store.set_limit("repo", None, 5)  # at run time: kept
        store.set_limit("agent", "codex", 6)  # a declared one changed at run time: kept
        first = store.settings()

        # When: the file drops the workspace limit, ann's and both agents' caps, serve runs again
        path.write_text(
            "limits:\n"
            "  - {key: user, value: ann, max: 2}\n"
            "agents:\n"
            "  claude: {command: [claude, -p, '{prompt}']}\n"
            "  codex: {command: [codex, exec, '{prompt}']}\n"
        )
        apply_config(store, load_config(path, env={}))
        told = [e.seq for e in store.events() if e.kind == "limit"]
        apply_config(store, load_config(path, env={}))  # unchanged: nothing to tell
        second = store.settings()
        assert [e.seq for e in store.events() if e.kind == "limit"] == told
    finally:
        store.close()

    def shown(settings: Settings) -> set[tuple[str, str | None, int, str]]:
        return {(lim.key, lim.value, lim.max, lim.origin) for lim in settings.per_key}

    assert shown(first) == {
        ("workspace", None, 1, "config"),
        ("user", "ann", 2, "config"),
        ("agent", "claude", 3, "config"),
        ("agent", "codex", 6, "api"),
        ("repo", None, 5, "api"),
    }
    assert shown(second) == {
        ("user", "ann", 2, "config"),
        ("agent", "codex", 6, "api"),
        ("repo", None, 5, "api"),
    }
    assert {"key": "user", "value": "ann", "max": 2, "origin": "config"} in second.to_dict()[
        "limits"
    ]
