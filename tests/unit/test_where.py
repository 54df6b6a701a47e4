"""Composed queries: `Where` fragments, their parameters renamed per use, lists."""

from __future__ import annotations

import pytest

from slotline.store.statements import Composed, Where, load_queries


def test_a_tuple_parameter_becomes_one_parameter_per_value_in_either_style() -> None:
    for dialect, first, second in (
        ("sqlite", ":ids_0_0", ":ids_0_1"),
        ("postgres", "%(ids_0_0)s", "%(ids_0_1)s"),
    ):
        queries = load_queries(dialect)
        sql, params = (
            Where().all("attempts_where_tasks", ids=("a", "b")).compose(queries, "attempts_page")
        )
        assert isinstance(sql, Composed)
        assert f"task_id IN ({first}, {second})" in sql
        assert params == {"ids_0_0": "a", "ids_0_1": "b"}


def test_each_use_of_a_fragment_gets_its_own_names_beside_a_list() -> None:
    where = (
        Where()
        .all("attempts_where_tasks", ids=("a", "b", "c"))
        .any("tasks_where_status", [{"status": "queued"}, {"status": "running"}])
    )
    sql, params = where.compose(load_queries("sqlite"), "tasks_page_count")
    assert params == {
        "ids_0_0": "a", "ids_0_1": "b", "ids_0_2": "c", "status_3": "queued", "status_4": "running",
    }  # fmt: skip
    assert "(status = :status_3) OR (status = :status_4)" in sql


def test_an_empty_list_is_refused_rather_than_run_differently_per_store() -> None:
    with pytest.raises(ValueError, match="empty list"):
        Where().all("attempts_where_tasks", ids=()).compose(load_queries("sqlite"), "attempts_page")
