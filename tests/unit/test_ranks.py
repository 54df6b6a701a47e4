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
