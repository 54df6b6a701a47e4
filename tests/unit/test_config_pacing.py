"""slotline.yaml: rates, fairness and provider back-off, their errors (file, line, key),
and `serve` writing them into the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotline.cli.apply import apply_config
from slotline.config.file import load_config
from slotline.errors import InvalidInput
from slotline.store import open_store

PACED = """\
rates:
  - {key: global, rate: 100/1h}
  - {key: user, rate: 5/1m}
fairness: {key: user, weights: {alice: 2}}
agents:
  claude:
    command: [claude, -p, "{prompt}"]
    rate: 20/1m
    backoff:
      exit_codes: [75]
      pattern: "(?i)rate.?limit|HTTP 429"
      delay: 30
      max_delay: 600
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "slotline.yaml"
    path.write_text(text)
    return path


def test_rates_fairness_and_backoff_load_and_serve_writes_them(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, PACED), env={})
    store = open_store(tmp_path / "q.db")
    try:
        apply_config(store, config)
        settings = store.settings()
    finally:
        store.close()

    rates = {(r.key, r.value): r.rate for r in settings.rates}
    assert rates == {
        ("global", None): "100/1h",
        ("user", None): "5/1m",
        ("agent", "claude"): "20/1m",
    }
    assert settings["fairness"] == {"key": "user", "weights": {"alice": 2.0}}
    rule = settings["backoff"]["claude"]
    assert (rule["exit_codes"], rule["delay"], rule["max_delay"]) == ([75], 30.0, 600.0)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "agents:\n  c:\n    command: [c]\n    backoff: {exit_codes: [75], pattern: '(x'}\n",
            ":4: agents.c.backoff.pattern: pattern '(x' is not a valid regex",
        ),
        ("agents:\n  c:\n    command: [c]\n    backoff: {delay: 3}\n", ":4: agents.c.backoff:"),
        ("agents:\n  c:\n    command: [c]\n    rate: 20/0s\n", ":4: agents.c.rate:"),
        ("rates:\n  - {key: colour, rate: 1/1m}\n", ":2: rates.0.key: unknown rate key"),
        ("rates:\n  - {key: user, rate: often}\n", ":2: rates.0.rate: 'often' is not a rate"),
        ("fairness: {key: colour}\n", ":1: fairness.key: unknown fairness key"),
        ("fairness: {key: user, weights: {a: 0}}\n", ":1: fairness.weights"),
    ],
)
def test_bad_pacing_names_the_file_line_and_key(tmp_path: Path, text: str, where: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InvalidInput) as caught:
        load_config(path, env={})
    assert f"{path}{where}" in str(caught.value)
