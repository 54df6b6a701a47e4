"""Copying a frozen dataclass with some fields changed, at half the cost of
`dataclasses.replace`.

A frozen dataclass sets each field in `__init__` through `object.__setattr__`, and
`dataclasses.replace` checks every field before it calls `__init__`: 35 µs to copy a
`Task` (61 fields), which the claim does for every task it starts and the reads for
every task they place in line or give an estimate. A `Copier` reads the fields all at
once (`operator.attrgetter`) and sets them through the slots' own descriptors: the same
value (`tests/unit/test_frozen.py` holds it to `replace`), in 15 µs. For a slotted,
frozen dataclass whose fields are all set by `__init__` and with no `__post_init__`:
the copy is made without calling `__init__`.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Copier(Generic[T]):
    """`copy(value, **changes)`: `dataclasses.replace` for instances of `cls`."""

    def __init__(self, cls: type[T]) -> None:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        params = getattr(cls, "__dataclass_params__", None)
        if not (params and params.frozen and hasattr(cls, "__slots__")):
            raise TypeError(f"{cls.__name__} is not a frozen dataclass with slots")
        if hasattr(cls, "__post_init__") or not all(f.init for f in fields):
            raise TypeError(f"{cls.__name__} does more in __init__ than set its fields")
        names = [f.name for f in fields]
        self._cls = cls
        self._index = {name: i for i, name in enumerate(names)}
        if len(names) < 2:  # (`attrgetter` of one name gives the value, not a tuple)
            raise TypeError(f"{cls.__name__} has fewer than two fields: use `replace`")
        self._values: Callable[[T], tuple[Any, ...]] = operator.attrgetter(*names)
        self._setters = tuple(getattr(cls, name).__set__ for name in names)

    def __call__(self, value: T, /, **changes: Any) -> T:
        values = list(self._values(value))
        for name, new in changes.items():
            index = self._index.get(name)
            if index is None:
                raise TypeError(f"{self._cls.__name__} has no field {name!r}")
            values[index] = new
        copy = object.__new__(self._cls)
        for set_field, field_value in zip(self._setters, values, strict=True):
            set_field(copy, field_value)
        return copy
