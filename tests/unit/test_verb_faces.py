"""Every face of the queue against the one verb list (slotline/api/verbs.py): a face that
lacks a declared verb without a reason, has a verb the list does not declare, or names its
arguments otherwise fails here."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from slotline.api.queue import Queue
from slotline.api.sync import SyncQueue, _Sync
from slotline.api.verbs import FACES, MCP_SPELLING, PLUMBING, VERBS, Verb
from slotline.client.backend import Backend
from slotline.client.http import SlotlineClient
from slotline.mcp.tools import build_server


def _arguments(function: Any, skip: int = 1) -> tuple[str, ...]:
    return tuple(list(inspect.signature(function).parameters)[skip:])


def _members(cls: type) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            found[name] = ()
        elif isinstance(member, _Sync):
            found[name] = _arguments(member.method)
        elif inspect.isfunction(member):
            found[name] = _arguments(member)
    return found


def _mcp_tools() -> dict[str, tuple[str, ...]]:
    back = {mcp: ours for ours, mcp in MCP_SPELLING.items()}
    server = build_server(lambda ctx: None)
    return {
        tool.name: tuple(back.get(p, p) for p in tool.parameters.get("properties", {}))
        for tool in server._tool_manager.list_tools()
    }


FACE_MEMBERS = {
    "backend": _members(Backend),
    "client": _members(SlotlineClient),
    "queue": _members(Queue),
    "sync": _members(SyncQueue),
    "mcp": _mcp_tools(),
}


def test_the_list_names_each_verb_once_and_only_known_faces() -> None:
    names = [v.name for v in VERBS]
    assert len(names) == len(set(names))
    for one in VERBS:
        for part in (one.spelled, one.omitted, one.differs):
            assert set(part) <= set(FACES), one.name
        assert not set(one.omitted) & set(one.spelled), one.name
        assert all(reason.strip() for reason in one.omitted.values()), one.name
        assert all(reason.strip() for _, reason in one.differs.values()), one.name


@pytest.mark.parametrize("face", FACES)
def test_a_face_has_every_verb_it_does_not_say_why_it_lacks(face: str) -> None:
    members = FACE_MEMBERS[face]
    missing = [
        v.spelled.get(face, v.name)
        for v in VERBS
        if face not in v.omitted and v.spelled.get(face, v.name) not in members
    ]
    assert missing == [], f"{face} lacks {missing}: add them, or say why in api/verbs.py"


@pytest.mark.parametrize("face", FACES)
def test_a_face_has_no_verb_the_list_does_not_declare(face: str) -> None:
    declared = {v.spelled.get(face, v.name) for v in VERBS if face not in v.omitted}
    extra = sorted(set(FACE_MEMBERS[face]) - declared - PLUMBING[face])
    assert extra == [], f"{face} has {extra}: declare them in api/verbs.py"


def _cases() -> list[tuple[str, Verb]]:
    return [(face, v) for v in VERBS for face in FACES if face not in v.omitted]


@pytest.mark.parametrize(("face", "one"), _cases(), ids=lambda x: getattr(x, "name", x))
def test_a_face_spells_a_verbs_arguments_as_the_list(face: str, one: Verb) -> None:
    wanted = one.differs.get(face, (one.arguments, ""))[0]
    assert FACE_MEMBERS[face][one.spelled.get(face, one.name)] == wanted
