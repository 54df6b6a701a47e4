"""`/metrics`: the store's Prometheus collector (`collector.py`) in the text format, whole
for an admin or viewer, aggregated for a user when slotline.yaml shares the totals."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, HTTPException
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from slotline.server.context import Reader, State
from slotline.server.errors import ERROR_RESPONSES
from slotline.server.visibility import TOTALS_WITHHELD, sees_totals

router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response, responses=ERROR_RESPONSES)
async def metrics(state: State, who: Reader) -> Response:
    """Prometheus text format, for an admin or viewer token (a monitoring scraper). Every
    metric counts every user's tasks, so a user or task token is refused (403) unless
    slotline.yaml shares the totals (`share_totals: true`); then it gets the aggregates
    only: no metric whose label values name other users, their workspaces or agents."""
    if not sees_totals(state, who):
        raise HTTPException(403, f"token {who.name!r} is a {who.role}: {TOTALS_WITHHELD}")
    registry = state.metrics.registry if who.sees_all else state.metrics.aggregate_registry
    body = await asyncio.to_thread(generate_latest, registry)
    return Response(body, media_type=CONTENT_TYPE_LATEST)
