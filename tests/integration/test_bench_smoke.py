"""The benchmark's slotline side runs its workloads to completion (a smoke test: no timings)."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType

import pytest

from slotline.store import open_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The `bench` package, importable from the repository root."""
    monkeypatch.syspath_prepend(str(ROOT))
    importlib.import_module("bench.slotline_side")
    importlib.import_module("bench.workloads")
    importlib.import_module("bench.child")
    return importlib.import_module("bench")


def test_noop_drain_succeeds_for_every_task(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    bench.slotline_side.fill(path, bench.workloads.NOOP, 20, limit=4)

    drained = bench.slotline_side.drain(path, timeout=60)

    assert drained.succeeded == 20
    with open_store(path) as store:
        assert store.counts() == {"succeeded": 20}


def test_handoff_reports_a_gap_between_each_pair_of_tasks(
    bench: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "store.db"
    bench.slotline_side.fill(path, bench.workloads.STAMP, 5, limit=1)

    drained = bench.slotline_side.drain(path, timeout=60)

    assert drained.succeeded == 5
    assert len(drained.gaps) == 4
    assert len(drained.store_gaps) == 4


def test_process_drain_in_a_child_reports_every_task_and_its_memory(
    bench: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "store.db"
    bench.slotline_side.fill(path, bench.workloads.SLEEP, 3, limit=2, sleep=0.01)

    result = bench.child.run_child("slotline", "drain", path, 60, n=3)

    assert result["succeeded"] == 3
    assert result["peak_rss_kb"] > 0


def test_scale_workload_measures_every_read_and_the_node_behind_a_backlog(
    bench: ModuleType, tmp_path: Path
) -> None:
    scale = importlib.import_module("bench.scale")
    args = argparse.Namespace(repeat=1, node_seconds=0.5, postgres=None)

    result = scale.measure("sqlite", 50, args, tmp_path)

    assert result["queued"] == 50
    for name in ("status_head_ms", "position_ms", "submit_ms", "get_with_eta_ms"):
        assert len(result[name]) == 3  # median, min, max
    assert result["node"]["rate"] > 0
    assert "| sqlite | 50 |" in scale.render([result])


def test_noop_drain_through_serve_app_succeeds_for_every_task(
    bench: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "store.db"
    bench.slotline_side.fill(path, bench.workloads.NOOP, 20, limit=4)

    drained = bench.slotline_side.drain_served(path, timeout=120)

    assert drained.succeeded == 20
    assert drained.node_rss_kb
    with open_store(path) as store:
        assert store.counts() == {"succeeded": 20}
        assert {t.callable for t in store.list_tasks()} == {bench.workloads.NOOP}
