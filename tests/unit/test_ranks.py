from hypothesis import given
from hypothesis import strategies as st

from slotline.scheduler.ranks import between, seq_rank


def test_seq_ranks_sort_in_sequence_order() -> None:
    ranks = [seq_rank(n) for n in (1, 2, 9, 10, 11, 100, 12345)]
    assert ranks == sorted(ranks)


def test_between_head_and_tail() -> None:
    first = seq_rank(1)
    head = between(None, first)
    assert head < first
    assert between(head, first) < first


def test_between_a_rank_and_the_tail() -> None:
    last = seq_rank(7)
    tail = between(last, None)
    assert last < tail
    assert last < between(last, tail) < tail
    assert between(None, None) < between(between(None, None), None)


@given(st.integers(min_value=1, max_value=10**15 - 1), st.integers(min_value=1, max_value=300))
def test_appending_at_the_tail_always_finds_room(seq: int, appends: int) -> None:
    # Given any rank, when we keep placing a task after the last one,
    # then each new rank sorts after it (and is a valid rank: no trailing zero).
    last = seq_rank(seq)
    for _ in range(appends):
        after = between(last, None)
        assert last < after
        assert not after.endswith("0")
        last = after


@given(st.lists(st.booleans(), min_size=1, max_size=200))
def test_repeated_insertion_always_finds_room(sides: list[bool]) -> None:
    # Given two neighbours, when we keep inserting next to one of them,
    # then every new rank sorts strictly between its neighbours.
    lo, hi = seq_rank(5), seq_rank(6)
    for toward_lo in sides:
        mid = between(lo, hi)
        assert lo < mid < hi
        if toward_lo:
            hi = mid
        else:
            lo = mid
