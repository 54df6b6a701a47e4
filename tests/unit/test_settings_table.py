"""Every face that lists the settings agrees with their one table (config/settings.py):
slotline.yaml's fields, the SLOTLINE_* variables, the store's defaults and checks, the
policy's default limit, `serve`'s options, the HTTP body of /api/limits and the docs."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import click
import pytest

from slotline.bounds import Range
from slotline.cli.serve import serve
from slotline.config import settings as table
from slotline.config.file import ENV_KEYS, Config
from slotline.scheduler.policy import Limits
from slotline.server.limit_schemas import LimitsBody
from slotline.store import NONE_MEANS_NO_BOUND, SETTING_RULES
from slotline.store.settings import DEFAULT_SETTINGS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "config.md"


@pytest.mark.parametrize("setting", table.FROM_FILE, ids=lambda s: s.name)
def test_the_files_field_has_the_tables_type_default_and_bounds(setting: table.Setting) -> None:
    field = Config.model_fields[setting.name]
    assert field.default == setting.default
    # `Annotated[int, BOUNDS] | None`: the bounds sit on the number, not on the union.
    members = typing.get_args(field.annotation) or (field.annotation,)
    assert (type(None) in members) is setting.optional
    numbers = [m for m in members if m is not type(None)]
    metadata = [*field.metadata, *(x for m in numbers for x in typing.get_args(m)[1:])]
    assert [m for m in metadata if isinstance(m, Range)] == (
        [] if setting.bounds is None else [setting.bounds]
    )
    assert {typing.get_args(m)[0] if typing.get_args(m) else m for m in numbers} == {setting.kind}


def test_the_environment_overrides_the_settings_a_file_may_set() -> None:
    assert ("store", *(s.name for s in table.FROM_FILE), "env_allow") == ENV_KEYS


def test_the_store_keeps_and_checks_the_queues_settings_as_the_table_says() -> None:
    queue = {s.name: s for s in table.QUEUE}
    assert set(SETTING_RULES) == set(queue)
    for name, (kind, low, high) in SETTING_RULES.items():
        assert (kind, low, high) == (queue[name].kind, *_bounds(queue[name]))
        assert DEFAULT_SETTINGS[name] == queue[name].default
    assert {s.name for s in table.QUEUE if s.optional} == NONE_MEANS_NO_BOUND
    # Node settings are each node's own: the store holds none of them.
    assert not {s.name for s in table.SETTINGS if s.scope is table.Scope.NODE} & set(
        DEFAULT_SETTINGS
    )


def _bounds(setting: table.Setting) -> tuple[float, float]:
    assert setting.bounds is not None
    return setting.bounds.minimum, setting.bounds.maximum


def test_the_policy_defaults_to_the_tables_global_limit() -> None:
    assert Limits().max_concurrent == table.default("max_concurrent") == 3


@pytest.mark.parametrize("name", ["max_concurrent", "lease", "slots"])
def test_serves_options_take_the_tables_bounds(name: str) -> None:
    option = next(p for p in serve.params if p.name == name)
    assert isinstance(option, click.Option)
    assert getattr(option.type, "bounds", None) == table.bounds(name)


def test_the_http_body_names_the_queues_settings() -> None:
    schema = LimitsBody.model_json_schema()["$defs"]["SettingsSet"]
    assert set(schema["properties"]) == {*(s.name for s in table.QUEUE), "paused"}
    assert schema["additionalProperties"] is False
    for setting in table.QUEUE:
        shown = schema["properties"][setting.name]
        number = next(s for s in shown.get("anyOf", [shown]) if s.get("type") != "null")
        assert number["type"] == ("integer" if setting.kind is int else "number")
        assert (number["minimum"], number["maximum"]) == _bounds(setting)
        assert ({"type": "null"} in shown.get("anyOf", [])) is setting.optional


@pytest.mark.parametrize("setting", table.FROM_FILE, ids=lambda s: s.name)
def test_the_docs_name_each_setting_a_file_may_set_with_its_variable(
    setting: table.Setting,
) -> None:
    assert re.search(rf"^\| `{setting.name}` \*env\* \|", DOCS.read_text(), re.M)
