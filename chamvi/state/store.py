"""Agent state in Qdrant payload collections: the Qdrant the knowledge index already runs.

Names (one rule, here only; knowledge names never hold ``__``, state names never start with ``_``):

* ``<prefix>__state__<agent>``: the agent's key-value entries, one point per key;
* ``<prefix>__state__<agent>__<collection>``: one declared collection, one point per item.

A point's id is a uuid5 of (agent, collection, key), so concurrent writes of different items never
touch the same point and a retried write overwrites itself. Its payload is ``{key, value,
updated_at, effect}``; ``effect`` is the effect key of the tool call that wrote it, so a call redone
after a crash finds its own write (``already_applied``).

Listing a page reads the points in the order of ``updated_at``, newest first, through a datetime
payload index (a Qdrant ``order_by``; ``offset`` and ``limit`` cut the page). Qdrant Edge and a
server walk the index; a collection written before it had one gets it on its first listing here.
This replaces what qdrant-client's local mode forced, which had no payload indexes, sorted every
point id in Python for each page of a scroll and tested a payload filter point by point in Python:
a page was then a vector query whose one-dimensional vector held the write time (a dot product with
``[1.0]``), which a float32 kept to 4 seconds, so writes closer together came in an order of their
own. The datetime index keeps microseconds. Points still carry that vector (seconds since
:data:`EPOCH`): a collection needs a vector, and an earlier version reading the same server still
lists them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic_core import to_json
from qdrant_client import AsyncQdrantClient

from chamvi._constants import STATE_PAGE_MAX_BYTES
from chamvi.models.state import StateItem, StatePage
from chamvi.vectors import Match, Point, VectorStore, Where
from chamvi.vectors.client import ClientStore

_NAMESPACE = uuid.UUID("5e0c2f3a-6b1d-4c7e-9a8f-2d4b6e1c3a57")
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_ORDER = "updated_at"


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
        self._indexed: set[str] = set()

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
            # a concurrent create elsewhere is no error
            await self.vectors.create(name, 1, "dot", {_ORDER: "datetime"})
            self._existing.add(name)
            self._indexed.add(name)

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
        """A page of items, most recently written first (in the order of a payload index).

        ``where`` keeps the items whose value has these fields equal to these values (a payload
        filter, tested in Qdrant's engine: values hold any fields, so none of them is indexed).
        """
        name = self.qdrant_collection(agent, collection)
        if not await self._exists(name):
            return StatePage()
        query_filter = Where(must=tuple(Match(f"value.{f}", v) for f, v in where.items())) if where else None
        if name not in self._indexed:
            await self.vectors.index_payload(name, _ORDER, "datetime")
            self._indexed.add(name)
        found = await self.vectors.ordered(
            name,
            _ORDER,
            where=query_filter,
            limit=limit + 1,  # one more tells whether a next page exists
            offset=offset,
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
