"""The task list, filtered and paged in SQL, on every store: the same tasks as the filter's
own definition (`TaskFilter.matches`), pages that join up, positions in the whole line."""

from __future__ import annotations

import pytest

from slotline.errors import InvalidInput, NotFound
from slotline.models import Status, Task
from slotline.store import Store
from slotline.taskfilter import ListQuery, TaskFilter

from .conftest import ClaimFn, Clock, FinishFn, SubmitFn


def every_page(store: Store, limit: int, **options: object) -> list[list[Task]]:
    """Read the list page by page, each after the last task of the one before."""
    pages, after = [], None
    while True:
        page = store.list_page(ListQuery(limit=limit, after=after, **options))  # type: ignore[arg-type]
        pages.append(page.tasks)
        after = page.next_after
        if after is None:
            return pages
        assert after == page.tasks[-1].id


@pytest.fixture
def mixed(store: Store, submit: SubmitFn, claim: ClaimFn, clock: Clock) -> list[Task]:
    """Twelve tasks of two agents, two users, two workspaces, labels that look alike,
    some running, one held, one subtask; in submission order."""
    store.set_setting("max_concurrent", 2)
    made = []
    for i in range(12):
        clock.advance(1)
        made.append(
            submit(
                f"Fix Bug {i}" if i % 3 else f"write docs {i}",
                agent="claude" if i % 2 else "aider",
                user="ann" if i < 6 else "bob",
                workspace="/w/a" if i % 4 else "/w/b",
                labels={"team": "infra"} if i % 3 == 0 else {"Team": "web", "note": '"team":'},
                priority=("high", "normal", "low")[i % 3],
                parent_id=made[0].id if i == 11 else None,
                expected_duration=60,
            )
        )
    claim()
    store.hold(made[5].id)
    return [store.get(t.id) for t in made]


FILTERS = [
    TaskFilter(),
    TaskFilter(status=[Status.QUEUED]),
    TaskFilter(status=[Status.RUNNING, Status.HELD]),
    TaskFilter(agent="claude"),
    TaskFilter(user="bob", workspace="/w/a"),
    TaskFilter(label=["team"]),
    TaskFilter(label=["team=infra"]),
    TaskFilter(label=["Team=web", "note"]),
    TaskFilter(label=["team=web"]),
    TaskFilter(q="bug 1"),
    TaskFilter(q="DOCS"),
    TaskFilter(agent="nobody"),
]


@pytest.mark.parametrize("wanted", FILTERS, ids=lambda f: f.model_dump_json(exclude_defaults=True))
def test_list_page_finds_what_the_filter_matches_in_submission_order(
    store: Store, mixed: list[Task], wanted: TaskFilter
) -> None:
    expected = [t.id for t in store.list_tasks(limit=1000) if wanted.matches(t)]

    page = store.list_page(ListQuery(wanted, limit=1000, count=True))

    assert [t.id for t in page.tasks] == expected
    assert page.total == len(expected)
    assert page.next_after is None


def test_list_page_finds_an_id_prefix_and_scopes_to_a_user_a_subtree_and_a_parent(
    store: Store, mixed: list[Task]
) -> None:
    one = mixed[4]
    assert [t.id for t in store.list_page(ListQuery(TaskFilter(q=one.id[:10]))).tasks] == [one.id]
    ann = store.list_page(ListQuery(owner="ann", limit=100)).tasks
    assert [t.id for t in ann] == [t.id for t in mixed if t.user == "ann"]
    tree = store.list_page(ListQuery(root=mixed[0].id)).tasks
    assert [t.id for t in tree] == [mixed[0].id, mixed[11].id]
    assert [t.id for t in store.list_page(ListQuery(parent_id=mixed[0].id)).tasks] == [mixed[11].id]
    # A scope and a filter together: both apply.
    assert store.list_page(ListQuery(TaskFilter(user="bob"), owner="ann")).tasks == []


@pytest.mark.parametrize("newest", [False, True])
def test_pages_join_up_without_repeats_or_gaps(
    store: Store, mixed: list[Task], newest: bool
) -> None:
    whole = [t.id for t in store.list_page(ListQuery(limit=1000, newest=newest)).tasks]
    assert whole == [t.id for t in (reversed(mixed) if newest else mixed)]

    pages = every_page(store, 5, newest=newest)

    assert [len(p) for p in pages] == [5, 5, 2]
    assert [t.id for p in pages for t in p] == whole


@pytest.mark.parametrize("newest", [False, True])
def test_tasks_submitted_between_pages_repeat_none_and_skip_none(
    store: Store, submit: SubmitFn, newest: bool
) -> None:
    # Given 20 tasks submitted at one instant (ties are ordered by id) and, between two
    # pages, more tasks submitted at that same instant and later
    before = {submit(f"t{i}").id for i in range(20)}
    seen: list[str] = []
    after = None
    while True:
        page = store.list_page(ListQuery(limit=3, after=after, newest=newest))
        seen.extend(t.id for t in page.tasks)
        submit("meanwhile")
        after = page.next_after
        if after is None:
            break

    # Then no task is listed twice, and every task that existed is listed
    assert len(seen) == len(set(seen))
    assert before <= set(seen)


def test_an_offset_skips_and_a_page_can_follow_an_offset(store: Store, mixed: list[Task]) -> None:
    page = store.list_page(ListQuery(limit=3, offset=4))
    assert [t.id for t in page.tasks] == [t.id for t in mixed[4:7]]
    nxt = store.list_page(ListQuery(limit=3, after=page.next_after, offset=1))
    assert [t.id for t in nxt.tasks] == [t.id for t in mixed[8:11]]


def test_queued_tasks_in_a_page_carry_their_positions_in_the_whole_line(
    store: Store, mixed: list[Task]
) -> None:
    # Mixed priorities, and one task started-next (boosted) from the back of the line.
    queued = [t for t in mixed if t.status is Status.QUEUED]
    store.boost(queued[-1].id)
    expected = {t.id: store.get(t.id, estimate=False).position for t in queued}
    assert sorted(p for p in expected.values() if p) == list(range(1, len(queued) + 1))

    for newest in (False, True):
        for page in every_page(store, 4, newest=newest):
            for task in page:
                assert task.position == expected.get(task.id)
                assert (task.position is None) == (task.status is not Status.QUEUED)


def test_a_page_carries_attempts_and_estimates(store: Store, mixed: list[Task]) -> None:
    tasks = store.list_page(ListQuery(limit=100)).tasks
    running = [t for t in tasks if t.status is Status.RUNNING]
    assert len(running) == 2
    assert all(len(t.attempts) == 1 for t in running)
    assert all(t.eta_start is not None for t in tasks if t.status is Status.QUEUED)


def test_continuing_after_an_unknown_or_hidden_task_is_refused(
    store: Store, mixed: list[Task]
) -> None:
    with pytest.raises(NotFound):
        store.list_page(ListQuery(after="f" * 32))
    bobs = next(t for t in mixed if t.user == "bob")
    with pytest.raises(NotFound):
        store.list_page(ListQuery(owner="ann", after=bobs.id))


def test_the_filtered_line_is_in_queue_order_with_positions_in_the_whole_line(
    store: Store, mixed: list[Task]
) -> None:
    whole = store.line(0, 100)
    claude = [t for t in whole.status.queued if t.agent == "claude"]

    line = store.line(0, 2, TaskFilter(agent="claude"))
    rest = store.line(2, 100, TaskFilter(agent="claude"))

    assert line.queued_total == len(claude)
    assert [(t.id, t.position) for t in line.status.queued + rest.status.queued] == [
        (t.id, t.position) for t in claude
    ]
    assert line.next_up == whole.next_up
    held = store.line(0, 10, TaskFilter(user="ann"), owner="ann")
    assert [t.id for t in held.parked] == [mixed[5].id]
    assert held.parked_total == 1
    assert store.line(0, 10, owner="bob").parked == []


def test_ended_first_lists_only_ended_tasks_the_last_to_end_first(
    store: Store, submit: SubmitFn, claim: ClaimFn, finish: FinishFn, clock: Clock
) -> None:
    # Given four runs that end in the reverse of their submission (the last one failed),
    # and a task still queued,
    store.set_setting("max_concurrent", 4)
    runs = [submit(f"run {i}") for i in range(4)]
    claims = {c.task.id: c for c in claim()}
    for task in reversed(runs):
        clock.advance(1)
        finish(claims[task.id], exit_code=1 if task is runs[0] else 0)
    submit("still queued")
    # then `ended` lists the ended ones, the last to end first, whole or page by page.
    expected = [t.id for t in runs]
    page = store.list_page(ListQuery(ended=True, count=True))
    assert ([t.id for t in page.tasks], page.total) == (expected, 4)
    assert [t.id for p in every_page(store, 1, ended=True) for t in p] == expected
    # A page cannot go on after a task that has not ended: it has no place in that order.
    queued = store.list_page(ListQuery(TaskFilter(status=[Status.QUEUED]))).tasks[0]
    with pytest.raises(InvalidInput, match="has not ended"):
        store.list_page(ListQuery(ended=True, after=queued.id))
