"""``/state``: what an agent remembers, behind ``state:read``.

The API process reads Qdrant itself (the worker's own process in ``chamvi dev``; a Qdrant server with
``QDRANT_URL`` for ``chamvi api`` on its own).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from chamvi._constants import STATE_COLLECTION_MAX_LENGTH, STATE_COLLECTION_PATTERN
from chamvi.http.auth import permission
from chamvi.http.errors import error_responses
from chamvi.http.params import AgentName
from chamvi.models.state import STATE_LIST_MAX, StateListing, StateListRequest
from chamvi.state.views import StateViews

READ = "state:read"

CollectionName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=STATE_COLLECTION_MAX_LENGTH,
        pattern=STATE_COLLECTION_PATTERN,
        description="A declared state collection",
    ),
]
Limit = Annotated[int, Query(ge=1, le=STATE_LIST_MAX)]
Offset = Annotated[int, Query(ge=0, le=1_000_000)]
_READING: dict[str, Any] = {
    "response_model": StateListing,
    "responses": error_responses(400, 401, 403, 404, 422),
    "openapi_extra": permission(READ),
}


def state_router(views: StateViews) -> APIRouter:
    """The ``/state`` routes over ``views``."""
    router = APIRouter(prefix="/state", tags=["state"])

    async def listing(agent: str, collection: str | None, limit: int, offset: int) -> StateListing:
        request = StateListRequest(agent=agent, collection=collection, limit=limit, offset=offset)
        return await views.listing(request)

    @router.get("/{agent}", summary="An agent's collections' sizes and key-value entries", **_READING)
    async def agent_state(agent: AgentName, limit: Limit = 20, offset: Offset = 0) -> StateListing:
        """Each declared collection with its size, and a page of key-value entries, newest first."""
        return await listing(agent, None, limit, offset)

    @router.get("/{agent}/{collection}", summary="A page of one state collection", **_READING)
    async def collection_state(
        agent: AgentName, collection: CollectionName, limit: Limit = 20, offset: Offset = 0
    ) -> StateListing:
        """The items of `collection`, most recently written first; `next_offset` asks for more."""
        return await listing(agent, collection, limit, offset)

    return router
