"""Budgets as pure values: how an amount is spelled and read, and when spend ages out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotline.errors import InvalidInput
from slotline.pacing.budgets import (
    Budget,
    BudgetBook,
    Spend,
    format_amount,
    parse_amount,
    parse_budget,
)


@pytest.mark.parametrize(
    ("text", "amount", "unit"),
    [
        ("50usd", 50.0, "usd"),
        ("0.5USD", 0.5, "usd"),
        ("$12.25", 12.25, "usd"),
        ("2Mtok", 2_000_000.0, "tok"),
        ("500ktok", 500_000.0, "tok"),
        ("1.5Mtok", 1_500_000.0, "tok"),
        ("1000 tokens", 1000.0, "tok"),
    ],
)
def test_amounts_in_dollars_and_tokens(text: str, amount: float, unit: str) -> None:
    assert parse_amount(text) == (amount, unit)


@pytest.mark.parametrize("text", ["", "50", "50eur", "-5usd", "0usd", "1.5tok", "2Xtok", "$"])
def test_a_bad_amount_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_amount(text)


def test_a_budget_is_amount_over_period() -> None:
    assert parse_budget("50usd/1d") == (50.0, "usd", 86400.0)
    assert parse_budget("2Mtok/1h") == (2_000_000.0, "tok", 3600.0)
    with pytest.raises(InvalidInput, match="AMOUNT/PERIOD"):
        parse_budget("50usd")


@given(
    st.one_of(
        st.tuples(st.integers(1, 10**12), st.just("tok")),
        st.tuples(st.integers(1, 10**8).map(lambda c: c / 100), st.just("usd")),
    )
)
def test_an_amount_reads_back_as_it_is_spelled(case: tuple[float, str]) -> None:
    amount, unit = case
    assert parse_amount(format_amount(amount, unit)) == (float(amount), unit)


def test_spend_ages_out_oldest_first() -> None:
    # $5 a day: $2 at t=0, $2 at t=100, $1 at t=200 reach it; it frees when the $2 of
    # t=0 leaves the window, one day after it.
    rule = Budget("agent", "claude", 5, "usd", 86400)
    spends = [Spend(0, 2, 0), Spend(100, 2, 0), Spend(200, 1, 0)]
    book = BudgetBook([rule], {("agent", "claude"): spends})

    class Task:
        def key_value(self, key: str) -> str | None:
            return "claude" if key == "agent" else None

    assert book.held_until(Task(), 300) == 86400
    assert book.held_until(Task(), 86400) is None
    assert BudgetBook([rule], {("agent", "claude"): spends[:2]}).held_until(Task(), 300) is None


@given(
    st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 50)), max_size=30),
    st.integers(1, 100),
    st.integers(1, 500),
    st.integers(0, 1500),
)
def test_held_until_is_the_first_instant_the_window_holds_less(
    runs: list[tuple[int, int]], amount: int, period: int, now: int
) -> None:
    rule = Budget("global", None, amount, "tok", period)
    book = BudgetBook([rule], {("global", ""): [Spend(at, 0.0, n) for at, n in runs if at <= now]})

    class Anything:
        def key_value(self, key: str) -> str | None:
            return "" if key == "global" else None  # every task's value of `global`

    def spent(t: float) -> int:
        return sum(n for at, n in runs if at <= now and t - period < at <= t)

    until = book.held_until(Anything(), now)
    if spent(now) < amount:
        assert until is None
    else:
        assert until is not None
        assert until > now
        assert spent(until) < amount
        assert spent(until - 0.5) >= amount  # spend only leaves at whole seconds here
