"""The claim's lookups of queue TTLs and start-now tasks go through their partial
indexes on SQLite, not through an index of every task of a status: each runs in every
claim, so a scan there costs every claim in proportion to the line (as migration 0010
once made it, by adding an index the planner preferred)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from slotline.scheduler import policy
from slotline.store import open_store
from slotline.store.statements import load_queries

EXPECTED = {
    "tasks_ttl_due": "tasks_ttl_deadline",
    "next_ttl_deadline": "tasks_ttl_deadline",
    "tasks_start_now": "tasks_start_now",
}


@pytest.mark.parametrize("query", sorted(EXPECTED))
def test_a_claim_lookup_uses_its_partial_index(tmp_path: Path, query: str) -> None:
    path = tmp_path / "plans.db"
    open_store(path).close()
    sql = load_queries("sqlite")[query].replace("{line_order}", policy.LINE_ORDER_SQL)
    params = dict.fromkeys(re.findall(r":([a-z_]+)", sql), 0)
    with sqlite3.connect(path) as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    assert f"USING INDEX {EXPECTED[query]}" in plan, plan
