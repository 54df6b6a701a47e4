"""Bad input is refused the same on every backend: numbers finite and bounded, no NUL
bytes, workspaces in one spelling, dashed UUIDs as ids, prefixes scoped to a user."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from typing import Any

import pytest

from slotline.bounds import MAX_COUNT
from slotline.errors import AmbiguousId, InvalidInput, NotFound
from slotline.models import Status
from slotline.store import Store

from .conftest import ClaimFn, SubmitFn


@pytest.mark.parametrize(
    "fields",
    [
        {"timeout": math.inf},
        {"queue_ttl": float("1e999")},
        {"expected_duration": math.nan},
        {"timeout": 1e12},
        {"title": "a\x00b"},
        {"workspace": "/w/a\x00b"},
        {"labels": {"team": "x" * 5000}},
        {"labels": {f"k{i}": "v" for i in range(100)}},
        {"args": {"x": "a\x00b"}},
        {"workspace": "../../../../etc"},
    ],
    ids=[
        "inf-timeout",
        "1e999-ttl",
        "nan-duration",
        "huge-timeout",
        "nul-title",
        "nul-workspace",
        "long-label",
        "many-labels",
        "nul-args",
        "relative-workspace",
    ],
)
def test_bad_submit_input_is_refused_and_creates_nothing(
    store: Store, submit: SubmitFn, fields: dict[str, Any]
) -> None:
    seq = store.last_seq()
    with pytest.raises(InvalidInput):
        submit(**{"title": "bad", **fields})
    assert store.last_seq() == seq
    assert store.counts() == {}


def test_numbers_out_of_bounds_in_settings_and_limits_are_refused(store: Store) -> None:
    for name, value in (
        ("aging_interval", 1e309),
        ("aging_interval", math.nan),
        ("max_concurrent", 2**63),
        ("max_concurrent", "9" * 40),
        ("retry_backoff_max", math.inf),
    ):
        with pytest.raises(InvalidInput, match=name):
            store.set_setting(name, value)
    with pytest.raises(InvalidInput, match="limit"):
        store.set_limit("agent", "claude", MAX_COUNT + 1)
    assert store.settings()["max_concurrent"] == 3
    assert store.settings()["aging_interval"] is None
    assert store.settings().per_key == ()


def test_a_workspace_is_one_key_however_it_is_spelled(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    store.set_limit("workspace", "/w/ws/", 1)
    first = submit("a", workspace="/w/ws")
    second = submit("b", workspace="/w/ws/")
    third = submit("c", workspace="//w/./x/../ws")

    assert {first.workspace, second.workspace, third.workspace} == {"/w/ws"}
    assert [lim.value for lim in store.settings().per_key] == ["/w/ws"]
    assert len(claim()) == 1  # the limit of one holds for every spelling
    assert len(claim()) == 0


def test_a_dashed_uuid_names_a_task_and_an_attempt(
    store: Store, submit: SubmitFn, claim: ClaimFn
) -> None:
    task = submit("a")
    dashed = str(uuid.UUID(task.id))
    assert "-" in dashed

    assert store.get(dashed).id == task.id
    assert store.get(dashed.upper()).id == task.id
    assert store.hold(dashed).status is Status.HELD
    store.release(dashed)
    (claimed,) = claim()
    assert store.attempt(str(uuid.UUID(claimed.attempt.id))).id == claimed.attempt.id
    with pytest.raises(InvalidInput, match="not a task id"):
        store.get(dashed + "-00")


def test_a_prefix_for_a_user_matches_only_their_tasks(store: Store, submit: SubmitFn) -> None:
    # 17 tasks of "bob" and one of "ann" sharing a first digit with one of bob's.
    bobs = [submit(f"b{i}", user="bob") for i in range(17)]
    anns = [submit(f"a{i}", user="ann") for i in range(17)]
    digit, _ = Counter(t.id[0] for t in bobs).most_common(1)[0]
    mine = [t for t in anns if t.id[0] == digit]

    # Ambiguous for everyone, but for ann only her own tasks count.
    with pytest.raises(AmbiguousId):
        store.get(digit)
    if len(mine) == 1:
        assert store.get(digit, user="ann").id == mine[0].id
    elif not mine:
        with pytest.raises(NotFound):
            store.get(digit, user="ann")
    # A full id of another user's task is unknown to ann, as an unknown id is.
    with pytest.raises(NotFound) as hidden:
        store.get(bobs[0].id, user="ann")
    with pytest.raises(NotFound) as unknown:
        store.get("0" * 32, user="ann")
    assert str(hidden.value) == str(unknown.value).replace("0" * 32, bobs[0].id)
    assert store.get(bobs[0].id, user="bob").id == bobs[0].id
