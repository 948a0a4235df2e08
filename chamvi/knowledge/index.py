"""Qdrant as the knowledge store: generations behind an alias, a document registry, collection meta.

Names (one rule, here only):

* ``<prefix>_<name>_g<N>``: the passages of generation N, embedded by one model and chunker;
* ``<prefix>_<name>``: the alias searches read, switched atomically to a complete generation;
* ``<prefix>__docs__<name>``: the registry, one point per document (hash, status, generation);
* ``<prefix>__meta``: one point per collection (``CollectionMeta``).

Registry and meta collections hold payloads; their one-dimensional vector is a placeholder.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import AsyncQdrantClient, models

from chamvi.models.knowledge import CollectionMeta, DocumentEntry

_NAMESPACE = uuid.UUID("0b5c7e36-1f0a-4c61-9d52-6a3f4f0e8d21")
_PLACEHOLDER = [1.0]
_SCROLL_PAGE = 10_000  # local mode re-sorts every id per page: large pages keep a scan linear


def point_id(*parts: str) -> str:
    """A stable Qdrant point id for ``parts``: writing the same thing again overwrites, never copies."""
    return str(uuid.uuid5(_NAMESPACE, "\0".join(parts)))


@dataclass(frozen=True)
class Passage:
    """One chunk of a document as it is embedded and stored; ``index`` is its position in the document."""

    document: str
    index: int
    text: str
    title: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Hit:
    """One passage a vector search returned, with the collection it came from and its score."""

    collection: str
    document: str
    index: int
    text: str
    score: float
    title: str | None
    source: str | None


def _document_filter(document_ids: Sequence[str]) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key="document", match=models.MatchAny(any=list(document_ids)))]
    )


class KnowledgeIndex:
    """Qdrant as the knowledge store: the one place that knows the naming rule of the module docstring.

    Args:
        client: the Qdrant client; local mode and a server both work.
        prefix: starts every Qdrant collection and alias name, so several apps can share one Qdrant.
    """

    def __init__(self, client: AsyncQdrantClient, prefix: str = "chamvi") -> None:
        self.client = client
        self.prefix = prefix

    # ---- names ----------------------------------------------------------------------------

    def alias(self, name: str) -> str:
        """The name searches read; it points at the collection's complete generation."""
        return f"{self.prefix}_{name}"

    def generation_collection(self, name: str, generation: int) -> str:
        """The Qdrant collection that holds one generation's passages."""
        return f"{self.prefix}_{name}_g{generation}"

    def _registry(self, name: str) -> str:
        return f"{self.prefix}__docs__{name}"

    @property
    def _meta(self) -> str:
        return f"{self.prefix}__meta"

    async def _ensure_payload_collection(self, collection: str) -> None:
        if not await self.client.collection_exists(collection):
            await self.client.create_collection(
                collection, vectors_config=models.VectorParams(size=1, distance=models.Distance.COSINE)
            )

    # ---- collection meta ------------------------------------------------------------------

    async def meta(self, name: str) -> CollectionMeta | None:
        """The stored meta of a collection, or None for a collection never indexed (or deleted)."""
        if not await self.client.collection_exists(self._meta):
            return None
        points = await self.client.retrieve(self._meta, ids=[point_id("meta", name)], with_payload=True)
        return CollectionMeta.model_validate(points[0].payload) if points else None

    async def save_meta(self, meta: CollectionMeta) -> None:
        """Stores ``meta`` where every process reads it, replacing the previous one."""
        await self._ensure_payload_collection(self._meta)
        await self.client.upsert(
            self._meta,
            points=[
                models.PointStruct(
                    id=point_id("meta", meta.name), vector=_PLACEHOLDER, payload=meta.model_dump(mode="json")
                )
            ],
        )

    async def all_meta(self) -> list[CollectionMeta]:
        """The meta of every collection this store knows, declared or managed, orphaned ones included."""
        if not await self.client.collection_exists(self._meta):
            return []
        return [CollectionMeta.model_validate(p) async for p in self._scroll_payloads(self._meta)]

    async def delete_collection(self, name: str) -> None:
        """Removes a collection with everything in it: generations, alias, registry, meta."""
        meta = await self.meta(name)
        generations = {g for g in (meta.generation, meta.building) if g is not None} if meta else set()
        for generation in generations:
            await self.delete_generation(name, generation)
        if await self.client.collection_exists(self._registry(name)):
            await self.client.delete_collection(self._registry(name))
        if await self.client.collection_exists(self._meta):
            await self.client.delete(
                self._meta, points_selector=models.PointIdsList(points=[point_id("meta", name)])
            )

    # ---- generations ----------------------------------------------------------------------

    async def ensure_generation(self, name: str, generation: int, dimensions: int) -> None:
        """Creates the generation's collection for vectors of ``dimensions``, unless it exists.

        Idempotent, so a pass retried after a crash can call it again.
        """
        collection = self.generation_collection(name, generation)
        if not await self.client.collection_exists(collection):
            await self.client.create_collection(
                collection,
                vectors_config=models.VectorParams(size=dimensions, distance=models.Distance.COSINE),
            )
            with warnings.catch_warnings():  # local mode has no payload indexes and warns; a server uses it
                warnings.simplefilter("ignore", UserWarning)
                await self.client.create_payload_index(
                    collection, "document", models.PayloadSchemaType.KEYWORD
                )

    async def generation_exists(self, name: str, generation: int) -> bool:
        """Whether the generation's collection exists (a pass checks it before writing into it)."""
        return await self.client.collection_exists(self.generation_collection(name, generation))

    async def switch_alias(self, name: str, generation: int) -> None:
        """Points the alias at ``generation`` in one operation: searches never see a half state."""
        alias = self.alias(name)
        operations: list[Any] = []
        aliases = await self.client.get_aliases()
        if any(a.alias_name == alias for a in aliases.aliases):
            operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        operations.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(
                    collection_name=self.generation_collection(name, generation), alias_name=alias
                )
            )
        )
        await self.client.update_collection_aliases(change_aliases_operations=operations)

    async def delete_generation(self, name: str, generation: int) -> None:
        """Drops a generation's collection once searches no longer read it; a missing one is not an error."""
        collection = self.generation_collection(name, generation)
        if await self.client.collection_exists(collection):
            await self.client.delete_collection(collection)

    # ---- passages -------------------------------------------------------------------------

    async def write_passages(
        self, name: str, generation: int, passages: Sequence[Passage], vectors: Sequence[Sequence[float]]
    ) -> None:
        """Writes passages, overwriting the ones a previous version of their document left.

        A document's passage ``i`` always has the same point id, so this overwrites its previous
        passages (``delete_passage_points`` removes any past the new count).
        """
        collection = self.generation_collection(name, generation)
        points = [
            models.PointStruct(
                id=point_id(p.document, str(p.index)),
                vector=list(vector),
                payload={
                    "document": p.document,
                    "index": p.index,
                    "text": p.text,
                    "title": p.title,
                    "source": p.source,
                },
            )
            for p, vector in zip(passages, vectors, strict=True)
        ]
        if points:
            await self.client.upsert(collection, points=points)

    async def delete_passage_points(self, name: str, generation: int, passages: Mapping[str, range]) -> None:
        """Deletes passages by point id: no scan, whatever the collection's size.

        Qdrant's local mode scans every point for a delete by filter, which a large collection feels.
        """
        ids: list[models.ExtendedPointId] = [
            point_id(document, str(index)) for document, indexes in passages.items() for index in indexes
        ]
        collection = self.generation_collection(name, generation)
        if ids and await self.client.collection_exists(collection):
            await self.client.delete(collection, points_selector=models.PointIdsList(points=ids))

    async def delete_passages(self, name: str, generation: int, document_ids: Sequence[str]) -> None:
        """Removes every passage of these documents by filter (documents gone, or moved elsewhere)."""
        collection = self.generation_collection(name, generation)
        if document_ids and await self.client.collection_exists(collection):
            await self.client.delete(
                collection, points_selector=models.FilterSelector(filter=_document_filter(document_ids))
            )

    async def count_passages(self, name: str, generation: int) -> int:
        """How many passages a generation holds (0 when it does not exist), counted exactly."""
        collection = self.generation_collection(name, generation)
        if not await self.client.collection_exists(collection):
            return 0
        return (await self.client.count(collection, exact=True)).count

    async def search(self, name: str, generation: int, vector: Sequence[float], limit: int) -> list[Hit]:
        """The ``limit`` passages of a generation nearest to ``vector``, best first."""
        result = await self.client.query_points(
            self.generation_collection(name, generation), query=list(vector), limit=limit, with_payload=True
        )
        return [
            Hit(
                collection=name,
                document=str(p.payload["document"]),
                index=int(p.payload["index"]),
                text=str(p.payload["text"]),
                score=float(p.score),
                title=p.payload.get("title"),
                source=p.payload.get("source"),
            )
            for p in result.points
            if p.payload is not None
        ]

    # ---- registry -------------------------------------------------------------------------

    async def entry(self, name: str, document_id: str) -> DocumentEntry | None:
        """The registry entry of one document, or None when the collection never had it."""
        registry = self._registry(name)
        if not await self.client.collection_exists(registry):
            return None
        points = await self.client.retrieve(registry, ids=[point_id("doc", document_id)], with_payload=True)
        return DocumentEntry.model_validate(points[0].payload) if points else None

    async def entries(self, name: str) -> AsyncIterator[DocumentEntry]:
        """Every registry entry of a collection, page by page, so a large registry is never held at once."""
        registry = self._registry(name)
        if not await self.client.collection_exists(registry):
            return
        async for payload in self._scroll_payloads(registry):
            yield DocumentEntry.model_validate(payload)

    async def entries_by_id(self, name: str, document_ids: Sequence[str]) -> dict[str, DocumentEntry]:
        """The registry entries of these documents in one request; ids without an entry are left out."""
        registry = self._registry(name)
        if not document_ids or not await self.client.collection_exists(registry):
            return {}
        points = await self.client.retrieve(
            registry, ids=[point_id("doc", d) for d in document_ids], with_payload=True, with_vectors=False
        )
        entries = [DocumentEntry.model_validate(p.payload) for p in points if p.payload is not None]
        return {e.id: e for e in entries}

    async def mark_seen(self, name: str, document_ids: Sequence[str], mark: int) -> None:
        """Records that pass ``mark`` read these documents (unchanged: nothing else is written)."""
        registry = self._registry(name)
        if document_ids:
            await self.client.set_payload(
                registry, payload={"seen": mark}, points=[point_id("doc", d) for d in document_ids]
            )

    async def unseen_entries(self, name: str, mark: int, limit: int = 1000) -> list[DocumentEntry]:
        """Up to ``limit`` documents pass ``mark`` did not read (those no source yields any more)."""
        registry = self._registry(name)
        if not await self.client.collection_exists(registry):
            return []
        points, _ = await self.client.scroll(
            registry,
            scroll_filter=models.Filter(
                must_not=[models.FieldCondition(key="seen", match=models.MatchValue(value=mark))]
            ),
            limit=limit,
            with_payload=True,
            with_vectors=False,
        )
        return [DocumentEntry.model_validate(p.payload) for p in points if p.payload is not None]

    async def count_entries(self, name: str, *, untrusted: bool = False) -> int:
        """How many documents the registry holds; ``untrusted`` counts only those marked untrusted."""
        registry = self._registry(name)
        if not await self.client.collection_exists(registry):
            return 0
        condition = (
            models.Filter(must=[models.FieldCondition(key="trusted", match=models.MatchValue(value=False))])
            if untrusted
            else None
        )
        return (await self.client.count(registry, count_filter=condition, exact=True)).count

    async def put_entries(self, name: str, entries: Iterable[DocumentEntry]) -> None:
        """Creates or replaces these documents' registry entries."""
        registry = self._registry(name)
        points = [
            models.PointStruct(
                id=point_id("doc", e.id), vector=_PLACEHOLDER, payload=e.model_dump(mode="json")
            )
            for e in entries
        ]
        if points:
            await self._ensure_payload_collection(registry)
            await self.client.upsert(registry, points=points)

    async def delete_entries(self, name: str, document_ids: Sequence[str]) -> None:
        """Removes these documents from the registry (their passages are deleted separately)."""
        registry = self._registry(name)
        if document_ids and await self.client.collection_exists(registry):
            await self.client.delete(
                registry,
                points_selector=models.PointIdsList(points=[point_id("doc", d) for d in document_ids]),
            )

    async def _scroll_payloads(self, collection: str) -> AsyncIterator[dict[str, Any]]:
        offset: Any = None
        while True:
            points, offset = await self.client.scroll(
                collection, limit=_SCROLL_PAGE, offset=offset, with_payload=True, with_vectors=False
            )
            for point in points:
                if point.payload is not None:
                    yield point.payload
            if offset is None:
                return
