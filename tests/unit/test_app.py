"""Declaring functions as tasks: names, options, and arguments stored as JSON by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import slotline
from slotline.errors import InvalidInput
from slotline.runner.functions import FunctionRef, bind_arguments, split_arguments


def plain(path: str, depth: int = 1, *, dry: bool = False) -> str:
    return f"{path}:{depth}:{dry}"


def positional(a: int, /, b: int, *rest: int, **extra: Any) -> tuple[Any, ...]:
    return (a, b, rest, extra)


def stored_then_called(function: Any, *args: Any, **kwargs: Any) -> Any:
    stored = bind_arguments(function, "f", args, kwargs)
    positional_args, keywords = split_arguments(function, stored)
    return stored, function(*positional_args, **keywords)


def test_arguments_are_stored_by_parameter_name_and_call_the_function_the_same() -> None:
    stored, value = stored_then_called(plain, "notes.md", dry=True)
    assert stored == {"path": "notes.md", "dry": True}
    assert value == "notes.md:1:True"
    stored, value = stored_then_called(positional, 1, 2, 3, 4, colour="red")
    assert stored == {"a": 1, "b": 2, "rest": [3, 4], "colour": "red"}
    assert value == (1, 2, (3, 4), {"colour": "red"})


def test_a_call_that_does_not_fit_the_signature_is_refused_naming_the_function() -> None:
    with pytest.raises(InvalidInput, match=r"^f\(\): missing a required argument: 'path'"):
        bind_arguments(plain, "f", (), {})
    with pytest.raises(InvalidInput, match="unexpected keyword argument 'colour'"):
        bind_arguments(plain, "f", ("x",), {"colour": "red"})


def test_an_argument_that_is_not_json_is_refused_naming_it() -> None:
    with pytest.raises(InvalidInput, match=r"argument 'path' of f is not JSON .*never pickled"):
        bind_arguments(plain, "f", (Path("notes.md"),), {})
    with pytest.raises(InvalidInput, match="argument 'colour' of f is not JSON"):
        bind_arguments(positional, "f", (1, 2), {"colour": {1, 2}})
    with pytest.raises(InvalidInput, match="argument 'depth' of f is not JSON"):
        bind_arguments(plain, "f", ("x", float("nan")), {})


def test_a_task_is_named_module_dot_qualname_unless_named() -> None:
    app = slotline.App("unused.db")
    declared = app.task(plain)
    named = app.task(name="review", priority="high", timeout=60)(positional)
    assert declared.name == f"{__name__}.plain"
    assert named.name == "review"
    assert named.defaults == {"priority": "high", "timeout": 60}
    # Calling a declared function runs it here.
    assert declared("a", 2) == "a:2:False"
    assert set(app.functions) == {declared.name, "review"}
    with pytest.raises(InvalidInput, match="already declared"):
        app.task(name="review")(plain)


def test_options_name_the_task_fields_and_after_takes_tasks_or_ids() -> None:
    app = slotline.App("unused.db")
    declared = app.task(plain)
    spec = declared.options(priority="high", after=["abc", "def"], hold=True).spec("x")
    assert spec == {
        "callable": declared.name,
        "args": {"path": "x"},
        "priority": "high",
        "depends_on": ["abc", "def"],
        "hold": True,
    }
    with pytest.raises(InvalidInput, match="unknown task option 'priorty'"):
        declared.options(priorty="high")


def test_a_process_mode_function_must_be_importable_by_name() -> None:
    app = slotline.App("unused.db")

    def nested() -> None: ...

    with pytest.raises(InvalidInput, match=r"cannot run in a worker process.*mode='thread'"):
        app.task(nested)
    assert app.task(mode="thread")(nested).entry() is nested
    assert app.task(plain).entry() == FunctionRef(__name__, "plain")
