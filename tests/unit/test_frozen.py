"""`slotline.frozen.Copier`: `dataclasses.replace` of a frozen, slotted dataclass, made
without `__init__`, must give the same value field for field."""

from __future__ import annotations

import dataclasses
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotline.frozen import Copier
from slotline.models import Kind, Priority, Status, Task, copy_task

NAMES = [f.name for f in dataclasses.fields(Task)]
every_field = operator.attrgetter(*NAMES)

TASK = Task(
    id="t1", kind=Kind.COMMAND, command=("true",), callable=None, args={"a": 1},
    title="t", agent="claude", workspace=None, user="ann", labels={"x": "y"}, env={},
    priority=Priority.HIGH, boosted=True, start_now=False, rank="r", status=Status.QUEUED,
    status_reason=None, depends_on=("t0",), parent_id=None, depth=0, max_attempts=3,
    backoff=1.0, timeout=60.0, queue_ttl=None, not_before=None, kill_request=None,
    restart_requested=False, created_at=1.0, queued_at=2.0, started_at=None,
    finished_at=None, exit_code=None, failure_reason=None, attempt_count=0,
    attempt_base=0, current_attempt=None, eta_start=9.0, next_up=True,
)  # fmt: skip

values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5))


@settings(deadline=None)  # the first example pays for the imports
@given(st.dictionaries(st.sampled_from(NAMES), values, max_size=len(NAMES)))
def test_a_copy_is_what_replace_makes_field_for_field(changes: dict[str, object]) -> None:
    copied = copy_task(TASK, **changes)
    replaced = dataclasses.replace(TASK, **changes)
    # Field for field: equality leaves out the estimates (`compare=False`).
    assert type(copied) is Task
    assert every_field(copied) == every_field(replaced)
    assert every_field(TASK) == every_field(dataclasses.replace(TASK))  # the original stands


def test_a_copy_is_frozen_too() -> None:
    copied = copy_task(TASK, status=Status.RUNNING)
    with pytest.raises(dataclasses.FrozenInstanceError):
        copied.status = Status.QUEUED  # type: ignore[misc]


def test_a_field_the_class_lacks_is_refused_as_replace_refuses_it() -> None:
    with pytest.raises(TypeError, match="no field 'colour'"):
        copy_task(TASK, colour="red")
    with pytest.raises(TypeError):
        dataclasses.replace(TASK, colour="red")  # type: ignore[call-arg]


@dataclasses.dataclass(frozen=True)
class _NoSlots:
    a: int
    b: int


@dataclasses.dataclass(slots=True)
class _NotFrozen:
    a: int
    b: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Checked:
    a: int
    b: int

    def __post_init__(self) -> None:
        if self.a < 0:
            raise ValueError("a < 0")


@dataclasses.dataclass(frozen=True, slots=True)
class _Derived:
    a: int
    b: int = dataclasses.field(init=False, default=0)


@pytest.mark.parametrize("cls", [_NoSlots, _NotFrozen, _Checked, _Derived])
def test_a_class_whose_init_does_more_than_set_its_fields_is_refused(cls: type) -> None:
    # A copy made without `__init__` would skip its check, or set a field it computes.
    with pytest.raises(TypeError):
        Copier(cls)
