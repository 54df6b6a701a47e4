"""What a submit asks for, checked: the TaskSpec of a submit body (an agent type's command
filled in, what the caller may choose checked), and, for a batch or a user's (a task's)
token, its parent and dependencies limited to the tasks the caller may see.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException

from slotline.config.file import Config
from slotline.config.templates import expand_agent_type
from slotline.errors import NotFound, UnknownDependency
from slotline.reach import bounded, check_submit
from slotline.server.auth import Principal
from slotline.server.bodies import SubmitBody
from slotline.server.context import ServerState, hidden
from slotline.spec import TaskSpec, parse_spec
from slotline.store import Store


def build_spec(
    body: SubmitBody,
    config: Config,
    who: Principal,
    admin_only_raw: bool,
    exempt: frozenset[str] = frozenset(),
) -> TaskSpec:
    """The TaskSpec a submit body asks for: an agent type's command filled from the
    config, the caller's name as `user` for a user token, raw commands checked, what a
    user may choose (workspace, repo, function: `slotline.reach`) checked, and an
    agent outside the global pool (`exempt`), or one whose runs get variables of the
    node's environment (`_type_only`), reached by non-admins only as its type.

    Raises:
        InvalidInput: a field is wrong (the message names it), or an unknown agent type.
        HTTPException: 403 when the caller may not submit this.
    """
    data: dict[str, Any] = body.model_dump(exclude_none=True)
    prompt = data.pop("prompt", None)
    if who.role == "user":
        if data.get("user", who.name) != who.name:
            raise HTTPException(403, f"token {who.name!r} may submit only as user {who.name!r}")
        data["user"] = who.name
    if who.role == "task":
        # A running task submits subtasks: under itself unless it names a task of its
        # subtree (checked in `checked_specs`), as its own user. Raw commands and env are not
        # kept from it, as it already runs code as the node's user; but not under an
        # agent type that passes the node's variables (`_type_only`): its key.
        if data.get("user", who.owner) != who.owner:
            raise HTTPException(403, f"a task token submits only as its task's user ({who.owner})")
        if who.owner is not None:
            data["user"] = who.owner
        data.setdefault("parent_id", who.task_id)
    elif admin_only_raw and not who.is_admin and data.get("env"):
        # An environment (LD_PRELOAD, PATH…) can run code as surely as a command can.
        raise HTTPException(403, "env is for admins here; agent types set their own")
    agent = data.get("agent")
    why = None if who.is_admin else _type_only(config, agent, exempt)
    if why is not None and not _as_its_type(data, prompt):
        raise HTTPException(
            403,
            f"agent {agent!r} {why}: submit it only as its agent type, "
            f'{{"agent": {json.dumps(agent)}, "prompt": …}}, without command, '
            "callable, kind or env",
        )
    raw = bool(data.get("command"))
    data = expand_agent_type(config, data, prompt)
    if raw and admin_only_raw and who.role not in ("admin", "task"):
        raise HTTPException(
            403, "raw commands are for admins here; submit an agent type with a prompt"
        )
    spec = parse_spec(data)
    if bounded(who.role):
        declared = config.agents.get(spec.agent or "")
        repo = None if declared is None else declared.repo
        check_submit(config.users, spec, repo, admin_only_raw)
    return spec


def _type_only(config: Config, agent: Any, exempt: frozenset[str]) -> str | None:
    """Why a non-admin may submit `agent` only as its type, or None: anything else under
    that name would run outside max_concurrent, or be handed the variables the type
    passes to its own runs (an API key)."""
    if not isinstance(agent, str):
        return None
    if agent in exempt:
        return "runs outside the global pool"
    declared = config.agents.get(agent)
    if declared is not None and (declared.env_required or declared.env_allow):
        return "passes variables of the node's environment to its runs (env_required, env_allow)"
    return None


def _as_its_type(data: dict[str, Any], prompt: str | None) -> bool:
    """Whether a submit is its agent type's own command filled with a prompt."""
    own = ("command", "callable", "args", "env")
    if prompt is None or data.get("kind") not in (None, "command"):
        return False
    return not any(data.get(field) for field in own)


def _visible_refs(store: Store, who: Principal, spec: TaskSpec) -> TaskSpec:
    """`spec` with its parent and dependencies as full ids, each checked to be a task
    `who` may see; one it may not see is answered exactly as an unknown one would be, so
    neither its existence nor its status (through `status_reason`) shows.

    Raises:
        NotFound: the parent is unknown or not visible.
        UnknownDependency: a dependency is unknown or not visible.
    """

    def visible(ref: str) -> str:
        task = store.get(ref, who.prefix_owner)
        if not who.sees(task):
            raise hidden(ref)
        return task.id

    parent = None if spec.parent_id is None else visible(spec.parent_id)
    needs = []
    for ref in spec.depends_on:
        try:
            needs.append(visible(ref))
        except NotFound:
            raise UnknownDependency(f"unknown dependency {ref!r}: no such task") from None
    return spec.model_copy(update={"parent_id": parent, "depends_on": needs})


async def _exempt_agents(state: ServerState) -> frozenset[str]:
    """Agents outside the global pool: by slotline.yaml, or set in the store at runtime."""
    declared = {name for name, agent in state.config.agents.items() if not agent.global_pool}
    settings = await state.call(state.store.settings)
    return frozenset(declared | set(settings["exempt_agents"]))


async def checked_specs(
    state: ServerState, who: Principal, bodies: list[SubmitBody]
) -> list[TaskSpec]:
    """The checked specs of a submit (one body) or a batch: `build_spec`, then, for a user
    (a task) token, its parents and dependencies limited to its own tasks (its subtree)."""
    exempt = frozenset[str]()
    if not who.is_admin and any(body.agent for body in bodies):
        exempt = await _exempt_agents(state)
    admin_only = state.raw_commands_admin_only
    specs = [build_spec(body, state.config, who, admin_only, exempt) for body in bodies]
    if who.sees_all or not any(s.parent_id or s.depends_on for s in specs):
        return specs

    def check_all() -> list[TaskSpec]:
        return [_visible_refs(state.store, who, spec) for spec in specs]

    return await state.call(check_all)
