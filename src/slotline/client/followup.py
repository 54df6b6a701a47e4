"""A follow-up of a task, submitted through whichever face the caller has: a store (made
from the agent type in the local configuration) or a server (made by the server)."""

from __future__ import annotations

from collections.abc import Callable

from slotline.client.backend import Backend
from slotline.config.file import Config
from slotline.models import Task


def submit_followup(
    backend: Backend,
    config: Config,
    ref: str,
    prompt: str,
    warn: Callable[[str], None] | None = None,
) -> Task:
    """A follow-up of `ref`: on a store, made from its agent type in the local
    configuration, else as a running node published it (`published.agent_config`: `warn`
    hears when both have it and they differ); through a server, by the server from its
    own (`POST /api/tasks/{ref}/followup`)."""
    from slotline.client.http import SlotlineClient
    from slotline.config.templates import followup_fields
    from slotline.store import Store

    if isinstance(backend, SlotlineClient):
        return backend.followup(ref, prompt)
    assert isinstance(backend, Store)
    followed = backend.get(ref)
    if followed.agent is not None:
        from slotline.config.published import store_agent_config

        config = store_agent_config(backend, config, followed.agent, warn)
    fields = followup_fields(config, followed, prompt)
    return backend.submit_followup(followed.id, prompt, fields)
