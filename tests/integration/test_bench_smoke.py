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


def test_sqlite_floors_time_every_bare_statement(bench: ModuleType, tmp_path: Path) -> None:
    floors = importlib.import_module("bench.floors")

    sample = floors.measure(tmp_path, 30, None)

    assert set(sample) == {
        "floor.sqlite_insert_normal",
        "floor.sqlite_insert_full",
        "floor.sqlite_claim",
        "floor.sqlite_schema_submit",
    }
    assert all(rate > 0 for rate in sample.values())
    assert "synchronous=FULL" in floors.render([sample])
    # The submit on slotline's schema made real tasks, each with its event, in line.
    store = open_store(tmp_path / "schema.db")
    try:
        line = store.status()
        assert line.queued_total == 30
        assert [e.kind for e in store.events()].count("submitted") == 30
    finally:
        store.close()


@pytest.mark.postgres
def test_postgres_floors_claim_every_row_and_leave_no_schema(
    bench: ModuleType, pg_url: str
) -> None:
    import psycopg

    floors = importlib.import_module("bench.floors")
    base = pg_url.split("?", 1)[0]
    query = "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench\\_%'"

    def bench_schemas() -> set[str]:  # (other tests make schemas of their own meanwhile)
        with psycopg.connect(base) as conn:
            return {row[0] for row in conn.execute(query).fetchall()}

    before = bench_schemas()
    assert floors.pg_insert_rate(base, 20) > 0
    assert floors.pg_claim_rate(base, 20) > 0  # raises if a claim found no queued row
    assert bench_schemas() <= before


def test_goals_table_says_met_or_missed_from_same_round_ratios(bench: ModuleType) -> None:
    goals = importlib.import_module("bench.goals")
    rounds = [
        {"sqlite.slotline.submit": 300.0, "sqlite.huey.submit": 100.0},  # 3x: met (at least 2x)
        {"sqlite.slotline.submit": 100.0, "sqlite.huey.submit": 100.0},  # 1x
        {"sqlite.slotline.submit": 250.0, "sqlite.huey.submit": 100.0},  # 2.5x
    ]

    table = goals.render(rounds)

    row = next(line for line in table.splitlines() if "| huey |" in line and "submit" in line)
    assert "2.50 (1.00–3.00)" in row
    assert row.endswith("| met |")
    praison = next(line for line in table.splitlines() if "| praisonai |" in line)
    assert "not run" in praison


def test_a_missing_peer_venv_says_how_to_make_it(bench: ModuleType, tmp_path: Path) -> None:
    peers = importlib.import_module("bench.peers")

    assert peers.PRAISONAI.python(tmp_path / "nowhere") is None
    message = peers.PRAISONAI.missing(tmp_path / "nowhere")
    assert "BENCH_PRAISONAI_VENV" in message
    assert "pip install 'praisonai==" in message
