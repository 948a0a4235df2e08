"""Agent state in Qdrant payload collections: the Qdrant the knowledge index already runs.

Names (one rule, here only; knowledge names never hold ``__``, state names never start with ``_``):

* ``<prefix>__state__<agent>``: the agent's key-value entries, one point per key;
* ``<prefix>__state__<agent>__<collection>``: one declared collection, one point per item.

A point's id is a uuid5 of (agent, collection, key), so concurrent writes of different items never
touch the same point and a retried write overwrites itself. Its payload is ``{key, value,
updated_at, effect}``; ``effect`` is the effect key of the tool call that wrote it, so a call redone
after a crash finds its own write (``already_applied``).

Listing a page is a vector query, not a scroll. Each point's one-dimensional vector is its write
time, in seconds since :data:`EPOCH`, and the collection ranks by dot product: asking with ``[1.0]``
answers the most recently written items first, ``offset`` and ``limit`` cut the page. qdrant-client's
local mode scores every point with one numpy product and sorts the scores (3 to 5 ms at 100 000
items), where its scroll sorts every point id in Python for each page (200 ms and more), and a
payload filter tests each point in Python (over a second); ``bench/state.py`` measures both. A Qdrant
server answers the same query exactly (``exact=True``: a brute-force pass over 4-byte vectors, not
the approximate graph). A vector is a float32, whose 24 bits keep the write time to 4 seconds in
2026 and to 8 seconds until 2029: writes closer together than that rank as equals, in an order that
is fixed for a given state (in local mode, a few such writes come latest first), so paging stays
consistent, but "newest first" is only as fine as that.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_json
from qdrant_client import AsyncQdrantClient

from chamvi.constants import STATE_PAGE_MAX_BYTES
from chamvi.models.state import StateItem, StatePage
from chamvi.vectors import Match, Point, VectorStore, Where
from chamvi.vectors.client import ClientStore

_NAMESPACE = uuid.UUID("5e0c2f3a-6b1d-4c7e-9a8f-2d4b6e1c3a57")
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_NEWEST_FIRST = [1.0]


def state_point_id(agent: str, collection: str | None, key: str) -> str:
    """The point of one item (or, with no collection, one key-value entry): same key, same point."""
    return str(uuid.uuid5(_NAMESPACE, "\0".join((agent, collection or "", key))))


def _item(payload: Mapping[str, Any] | None) -> StateItem:
    payload = payload or {}
    return StateItem(
        key=payload.get("key", ""), value=payload.get("value"), updated_at=payload.get("updated_at")
    )


class StateStore:
    """Reads and writes agent state; values are JSON data here (``chamvi.state.access`` types them).

    Args:
        vectors: the storage (the knowledge index's: Qdrant Edge, or qdrant-client for a server); a
            bare ``AsyncQdrantClient`` is wrapped in a ``ClientStore``.
        prefix: starts every Qdrant collection name, as for the knowledge index.
    """

    def __init__(self, vectors: VectorStore | AsyncQdrantClient, prefix: str = "chamvi") -> None:
        self.vectors: VectorStore = (
            ClientStore(vectors) if isinstance(vectors, AsyncQdrantClient) else vectors
        )
        self.prefix = prefix
        self._existing: set[str] = set()
        self._creating = asyncio.Lock()

    def qdrant_collection(self, agent: str, collection: str | None = None) -> str:
        """Where an agent's key-value entries (no ``collection``) or one of its collections live."""
        base = f"{self.prefix}__state__{agent}"
        return f"{base}__{collection}" if collection else base

    async def _exists(self, name: str) -> bool:
        if name in self._existing:
            return True
        if await self.vectors.exists(name):
            self._existing.add(name)
            return True
        return False

    async def _ensure(self, name: str) -> None:
        if await self._exists(name):
            return
        async with self._creating:  # one create per name in this process
            if await self._exists(name):
                return
            await self.vectors.create(name, 1, "dot")  # a concurrent create elsewhere is no error
            self._existing.add(name)

    async def put(
        self, agent: str, collection: str | None, key: str, value: Any, *, effect: str | None = None
    ) -> StateItem:
        """Stores ``value`` (JSON data) under ``key``, replacing what was there; answers the stored item."""
        name = self.qdrant_collection(agent, collection)
        await self._ensure(name)
        now = datetime.now(UTC)
        payload = {"key": key, "value": value, "updated_at": now.isoformat(), "effect": effect}
        await self.vectors.upsert(
            name, [Point(state_point_id(agent, collection, key), [(now - EPOCH).total_seconds()], payload)]
        )
        return StateItem(key=key, value=value, updated_at=now)

    async def _payload(self, agent: str, collection: str | None, key: str) -> dict[str, Any] | None:
        name = self.qdrant_collection(agent, collection)
        if not await self._exists(name):
            return None
        point = state_point_id(agent, collection, key)
        points = await self.vectors.retrieve(name, [point])
        return dict(points[0].payload or {}) if points else None

    async def get(self, agent: str, collection: str | None, key: str) -> StateItem | None:
        """The item stored under ``key``, or None."""
        payload = await self._payload(agent, collection, key)
        return _item(payload) if payload is not None else None

    async def written_by(self, agent: str, collection: str | None, key: str) -> str | None:
        """The effect key of the tool call that last wrote ``key``, if a tool call did."""
        payload = await self._payload(agent, collection, key)
        return payload.get("effect") if payload is not None else None

    async def delete(self, agent: str, collection: str | None, key: str) -> bool:
        """Removes ``key``; answers whether it was there."""
        if await self._payload(agent, collection, key) is None:
            return False
        await self.vectors.delete(
            self.qdrant_collection(agent, collection), [state_point_id(agent, collection, key)]
        )
        return True

    async def page(
        self,
        agent: str,
        collection: str | None,
        *,
        limit: int,
        offset: int = 0,
        where: Mapping[str, str | int | bool] | None = None,
    ) -> StatePage:
        """A page of items, most recently written first (see the module docstring for why a query).

        ``where`` keeps the items whose value has these fields equal to these values (a payload filter:
        fast on a Qdrant server, a pass over every item in local mode).
        """
        name = self.qdrant_collection(agent, collection)
        if not await self._exists(name):
            return StatePage()
        query_filter = Where(must=tuple(Match(f"value.{f}", v) for f, v in where.items())) if where else None
        found = await self.vectors.search(
            name,
            _NEWEST_FIRST,
            where=query_filter,
            limit=limit + 1,  # one more tells whether a next page exists
            offset=offset,
            exact=True,
        )
        items: list[StateItem] = []
        size = 0
        for point in found[:limit]:
            item = _item(point.payload)
            size += len(to_json(item.value))
            if items and size > STATE_PAGE_MAX_BYTES:
                break  # a page crosses Temporal as one payload: the rest is the next page
            items.append(item)
        more = len(items) < len(found)
        return StatePage(items=items, next_offset=offset + len(items) if more else None)

    async def count(self, agent: str, collection: str | None) -> int:
        """How many items (or key-value entries) are stored."""
        name = self.qdrant_collection(agent, collection)
        if not await self._exists(name):
            return 0
        return await self.vectors.count(name)
