"""Qdrant as the knowledge store: generations behind an alias, a document registry, collection meta.

Names (one rule, here only):

* ``<prefix>_<name>_g<N>``: the passages of generation N, embedded by one model and chunker;
* ``<prefix>_<name>``: the alias searches read, switched atomically to a complete generation;
* ``<prefix>__docs__<name>``: the registry, one point per document (hash, status, generation);
* ``<prefix>__list__<name>``: the document list, pages of document ids behind a header
  (``chamvi.knowledge._listing``), so a pass finds deleted documents without a scan;
* ``<prefix>__meta``: one point per collection (``CollectionMeta``).

Registry and meta collections hold payloads; their one-dimensional vector is a placeholder.

A document of a declared collection that is ready and has passages keeps its registry entry on its
first passage instead (the payload key ``entry`` of passage 0, in the generation it was embedded
into), written in the same upsert as its passages. Qdrant's local mode on disk stores every point as
one SQLite transaction, so a registry point of its own cost a first index about as much again as its
passages. Every other entry (failed, empty, managed, or written before this layout) is a registry
point. A document has one or the other, never both: the registry reads here look in both.
"""

from __future__ import annotations

import base64
import functools
import uuid
import zlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from qdrant_client import AsyncQdrantClient

from chamvi.knowledge.sparse import passage_vectors
from chamvi.models.knowledge import CollectionMeta, DocumentEntry, DocumentListHeader
from chamvi.vectors import IsEmpty, Match, MatchAny, Point, Scored, SparseVector, VectorStore, Where
from chamvi.vectors.client import ClientStore

_NAMESPACE = uuid.UUID("0b5c7e36-1f0a-4c61-9d52-6a3f4f0e8d21")
_PLACEHOLDER = [1.0]
_SCROLL_PAGE = 10_000  # local mode re-sorts every id per page: large pages keep a scan linear
_STAMP = "entry"
"""The payload key of passage 0 that holds its document's registry entry."""


@functools.lru_cache(maxsize=1024)
def point_id(*parts: str) -> str:
    """A stable Qdrant point id for ``parts``: writing the same thing again overwrites, never copies.

    Cached (a few hundred kB at most): a pass asks for a document's first passage when it reads the
    document, looks its entry up and counts it, all within one lookup chunk.
    """
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


@dataclass(frozen=True)
class StoredEntry:
    """A registry entry and where it is kept: on the document's first passage (``stamped``) or not."""

    entry: DocumentEntry
    stamped: bool


def _stamped(*conditions: Match) -> Where:
    return Where(must=conditions, must_not=(IsEmpty(_STAMP),))


def _untrusted(key: str) -> Match:
    return Match(key, False)


def _document_filter(document_ids: Sequence[str]) -> Where:
    return Where(must=(MatchAny("document", tuple(document_ids)),))


class KnowledgeIndex:
    """Qdrant as the knowledge store: the one place that knows the naming rule of the module docstring.

    Args:
        vectors: the storage (``chamvi.vectors``): Qdrant Edge in a folder, or qdrant-client for a
            server; a bare ``AsyncQdrantClient`` is wrapped in a ``ClientStore``.
        prefix: starts every Qdrant collection and alias name, so several apps can share one Qdrant.
    """

    def __init__(self, vectors: VectorStore | AsyncQdrantClient, prefix: str = "chamvi") -> None:
        self.vectors: VectorStore = (
            ClientStore(vectors) if isinstance(vectors, AsyncQdrantClient) else vectors
        )
        self.prefix = prefix

    @property
    def client(self) -> VectorStore:
        """The storage, under the name callers used before it was a protocol (agent state shares it)."""
        return self.vectors

    # ---- names ----------------------------------------------------------------------------

    def alias(self, name: str) -> str:
        """The name searches read; it points at the collection's complete generation."""
        return f"{self.prefix}_{name}"

    def generation_collection(self, name: str, generation: int) -> str:
        """The Qdrant collection that holds one generation's passages."""
        return f"{self.prefix}_{name}_g{generation}"

    def _registry(self, name: str) -> str:
        return f"{self.prefix}__docs__{name}"

    def _list(self, name: str) -> str:
        return f"{self.prefix}__list__{name}"

    @property
    def _meta(self) -> str:
        return f"{self.prefix}__meta"

    async def _ensure_payload_collection(self, collection: str) -> None:
        if not await self.vectors.exists(collection):
            await self.vectors.create(collection, 1, "cosine")

    # ---- collection meta ------------------------------------------------------------------

    async def meta(self, name: str) -> CollectionMeta | None:
        """The stored meta of a collection, or None for a collection never indexed (or deleted)."""
        if not await self.vectors.exists(self._meta):
            return None
        points = await self.vectors.retrieve(self._meta, [point_id("meta", name)])
        return CollectionMeta.model_validate(points[0].payload) if points else None

    async def save_meta(self, meta: CollectionMeta) -> None:
        """Stores ``meta`` where every process reads it, replacing the previous one."""
        await self._ensure_payload_collection(self._meta)
        await self.vectors.upsert(
            self._meta, [Point(point_id("meta", meta.name), _PLACEHOLDER, meta.model_dump(mode="json"))]
        )

    async def all_meta(self) -> list[CollectionMeta]:
        """The meta of every collection this store knows, declared or managed, orphaned ones included."""
        if not await self.vectors.exists(self._meta):
            return []
        return [CollectionMeta.model_validate(p) async for p in self._scroll_payloads(self._meta)]

    async def delete_collection(self, name: str) -> None:
        """Removes a collection with everything in it: generations, alias, registry, meta."""
        meta = await self.meta(name)
        generations = {g for g in (meta.generation, meta.building) if g is not None} if meta else set()
        for generation in generations:
            await self.delete_generation(name, generation)
        for collection in (self._registry(name), self._list(name)):
            await self.vectors.drop(collection)
        await self.vectors.delete(self._meta, [point_id("meta", name)])

    # ---- generations ----------------------------------------------------------------------

    async def ensure_generation(
        self, name: str, generation: int, dimensions: int, *, sparse: bool = False
    ) -> None:
        """Creates the generation's collection for vectors of ``dimensions``, unless it exists.

        ``sparse``: a hybrid generation, whose passages keep a BM25 sparse vector beside the dense one.
        Idempotent, so a pass retried after a crash can call it again.
        """
        collection = self.generation_collection(name, generation)
        if not await self.vectors.exists(collection):
            await self.vectors.create(
                collection, dimensions, "cosine", {"document": "keyword"}, sparse=sparse
            )

    async def generation_exists(self, name: str, generation: int) -> bool:
        """Whether the generation's collection exists (a pass checks it before writing into it)."""
        return await self.vectors.exists(self.generation_collection(name, generation))

    async def switch_alias(self, name: str, generation: int) -> None:
        """Points the alias at ``generation`` in one operation: searches never see a half state."""
        await self.vectors.set_alias(self.alias(name), self.generation_collection(name, generation))

    async def optimize(self, name: str, generation: int) -> None:
        """Asks for the generation's search index to be built in the background (Edge; a server does it)."""
        await self.vectors.optimize(self.generation_collection(name, generation))

    async def delete_generation(self, name: str, generation: int) -> None:
        """Drops a generation's collection once searches no longer read it; a missing one is not an error."""
        await self.vectors.drop(self.generation_collection(name, generation))

    # ---- passages -------------------------------------------------------------------------

    async def write_passages(
        self,
        name: str,
        generation: int,
        passages: Sequence[Passage],
        vectors: Sequence[Sequence[float]],
        entries: Iterable[DocumentEntry] = (),
        *,
        sparse: bool = False,
    ) -> None:
        """Writes passages, overwriting the ones a previous version of their document left.

        A document's passage ``i`` always has the same point id, so this overwrites its previous
        passages (``delete_passage_points`` removes any past the new count).

        Args:
            name: the collection.
            generation: the generation written into.
            passages: the passages, each with its document and position.
            vectors: one vector per passage, in the same order.
            entries: registry entries kept on their document's passage 0, which ``passages`` must
                hold; the caller deletes any registry point these documents had.
            sparse: a hybrid generation: each passage gets its BM25 sparse vector too (computed
                here, from its text: ``chamvi.knowledge.sparse``).
        """
        collection = self.generation_collection(name, generation)
        # without its empty fields: local mode copies the payload on every read of the entry
        stamps = {e.id: e.model_dump(mode="json", exclude_none=True) for e in entries}
        points = []
        sparse_vectors: list[SparseVector | None] = (
            list(passage_vectors([p.text for p in passages])) if sparse else [None] * len(passages)
        )
        for p, vector, terms in zip(passages, vectors, sparse_vectors, strict=True):
            payload: dict[str, Any] = {
                "document": p.document,
                "index": p.index,
                "text": p.text,
                "title": p.title,
                "source": p.source,
            }
            if p.index == 0 and p.document in stamps:
                payload[_STAMP] = stamps.pop(p.document)
            points.append(Point(point_id(p.document, str(p.index)), vector, payload, terms))
        if stamps:
            raise ValueError(f"entries of documents without a passage 0 here: {sorted(stamps)!r}")
        if points:
            await self.vectors.upsert(collection, points)

    async def unstamp(self, name: str, generation: int, document_ids: Sequence[str]) -> None:
        """Removes the entries kept on these documents' first passages (their passages stay)."""
        collection = self.generation_collection(name, generation)
        if document_ids:
            await self.vectors.delete_payload(collection, [point_id(d, "0") for d in document_ids], [_STAMP])

    async def delete_passage_points(self, name: str, generation: int, passages: Mapping[str, range]) -> None:
        """Deletes passages by point id: no scan, whatever the collection's size.

        Qdrant's local mode scans every point for a delete by filter, which a large collection feels.
        """
        ids = [point_id(document, str(index)) for document, indexes in passages.items() for index in indexes]
        await self.delete_points(name, generation, ids)

    async def delete_points(self, name: str, generation: int, ids: Sequence[str]) -> None:
        """Deletes passages by their point ids (see ``passage_ids``)."""
        await self.vectors.delete(self.generation_collection(name, generation), ids)

    async def delete_passages(self, name: str, generation: int, document_ids: Sequence[str]) -> None:
        """Removes every passage of these documents by filter (documents gone, or moved elsewhere)."""
        if document_ids:
            await self.vectors.delete_where(
                self.generation_collection(name, generation), _document_filter(document_ids)
            )

    async def count_passages(self, name: str, generation: int) -> int:
        """How many passages a generation holds (0 when it does not exist), counted exactly."""
        collection = self.generation_collection(name, generation)
        if not await self.vectors.exists(collection):
            return 0
        return await self.vectors.count(collection)

    async def search(
        self,
        name: str,
        generation: int,
        vector: Sequence[float],
        limit: int,
        *,
        sparse: SparseVector | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """The ``limit`` passages of a generation nearest to ``vector``, best first.

        With ``sparse`` (a hybrid generation), the dense ranking fused with BM25's decisive head
        (``chamvi.vectors._fusion``), in the fused order; scores are cosines either way, and
        ``min_score`` drops passages below it.
        """
        collection = self.generation_collection(name, generation)
        if sparse is None or not sparse.indices:
            result = await self.vectors.search(collection, vector, limit=limit)
            if min_score is not None:
                result = [p for p in result if p.score >= min_score]
        else:
            result = await self.vectors.hybrid_search(
                collection,
                vector,
                sparse,
                limit=limit,
                min_score=min_score,
            )
        return self._hits(name, result)

    async def sparse_search(self, name: str, generation: int, sparse: SparseVector, limit: int) -> list[Hit]:
        """The ``limit`` passages of a hybrid generation best scored by BM25 alone (for measuring)."""
        collection = self.generation_collection(name, generation)
        return self._hits(name, await self.vectors.sparse_search(collection, sparse, limit=limit))

    @staticmethod
    def _hits(name: str, result: Sequence[Scored]) -> list[Hit]:
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
            for p in result
            if p.payload
        ]

    # ---- registry -------------------------------------------------------------------------

    async def entry(self, name: str, document_id: str) -> DocumentEntry | None:
        """The registry entry of one document, or None when the collection never had it."""
        registry = self._registry(name)
        if await self.vectors.exists(registry):
            points = await self.vectors.retrieve(registry, [point_id("doc", document_id)])
            if points:
                return DocumentEntry.model_validate(points[0].payload)
        for generation in await self._generations(name):
            found = await self._stamps(name, generation, [document_id])
            if document_id in found:
                return found[document_id]
        return None

    async def entries(self, name: str) -> AsyncIterator[DocumentEntry]:
        """Every registry entry of a collection, page by page, so a large registry is never held at once.

        Entries kept on passages are read from the current generation's.
        """
        registry = self._registry(name)
        if await self.vectors.exists(registry):
            async for payload in self._scroll_payloads(registry):
                yield DocumentEntry.model_validate(payload)
        meta = await self.meta(name)
        collection = self.generation_collection(name, meta.generation) if meta and meta.generation else None
        if collection and await self.vectors.exists(collection):
            async for payload in self._scroll_payloads(collection, _stamped(), [_STAMP]):
                yield DocumentEntry.model_validate(payload[_STAMP])

    async def find_entries(
        self, name: str, document_ids: Sequence[str], generation: int | None
    ) -> dict[str, StoredEntry]:
        """The entries of these documents, from the registry or from their passages in ``generation``.

        Two requests at most, whatever the number of ids; ids without an entry are left out.
        """
        registry = self._registry(name)
        found: dict[str, StoredEntry] = {}
        if document_ids and await self.vectors.exists(registry):
            points = await self.vectors.retrieve(registry, [point_id("doc", d) for d in document_ids])
            for p in points:
                if p.payload:
                    entry = DocumentEntry.model_validate(p.payload)
                    found[entry.id] = StoredEntry(entry, stamped=False)
        missing = [d for d in document_ids if d not in found]
        if missing and generation is not None:
            stamps = await self._stamps(name, generation, missing)
            found.update((d, StoredEntry(e, stamped=True)) for d, e in stamps.items())
        return found

    async def registry_ids(self, name: str) -> AsyncIterator[list[str]]:
        """The document ids of a collection's registry points, a page at a time.

        The caller may delete a page's points before asking for the next.
        """
        registry = self._registry(name)
        if not await self.vectors.exists(registry):
            return
        page: list[str] = []
        async for payload in self._scroll_payloads(registry, None, ["id"]):
            page.append(payload["id"])
            if len(page) == _SCROLL_PAGE:
                yield page
                page = []
        if page:
            yield page

    async def passage_ids(self, name: str, generation: int) -> AsyncIterator[list[str]]:
        """The point ids of every passage in ``generation``, a page at a time, without payloads.

        Ids only and no filter: local mode copies each payload it returns and evaluates a filter
        over every point for each page, so this is the cheap way to see what a generation holds.
        The caller may delete a page's points before asking for the next.
        """
        collection = self.generation_collection(name, generation)
        if not await self.vectors.exists(collection):
            return
        offset: str | None = None
        while True:
            points, offset = await self.vectors.scroll(
                collection, limit=_SCROLL_PAGE, offset=offset, payload=False
            )
            if points:
                yield [str(p.id) for p in points]
            if offset is None:
                return

    async def passage_documents(self, name: str, generation: int, ids: Sequence[str]) -> dict[str, str]:
        """The document of each of these passages (by point id); ids no longer stored are left out."""
        if not ids:
            return {}
        points = await self.vectors.retrieve(self.generation_collection(name, generation), ids, ["document"])
        return {p.id: str(p.payload["document"]) for p in points if p.payload}

    async def count_entries(self, name: str, generation: int | None, *, untrusted: bool = False) -> int:
        """How many documents the collection has; ``untrusted`` counts only those marked untrusted.

        Args:
            name: the collection.
            generation: the generation whose passages keep entries too (None: the registry alone).
            untrusted: count only the entries marked untrusted.
        """
        count = 0
        registry = self._registry(name)
        if await self.vectors.exists(registry):
            condition = Where(must=(_untrusted("trusted"),)) if untrusted else None
            count += await self.vectors.count(registry, condition)
        collection = self.generation_collection(name, generation) if generation is not None else None
        if collection and await self.vectors.exists(collection):
            stamped = _stamped(_untrusted(f"{_STAMP}.trusted")) if untrusted else _stamped()
            count += await self.vectors.count(collection, stamped)
        return count

    async def _generations(self, name: str) -> list[int]:
        meta = await self.meta(name)
        return [g for g in (meta.generation, meta.building) if g is not None] if meta else []

    async def _stamps(
        self, name: str, generation: int, document_ids: Sequence[str]
    ) -> dict[str, DocumentEntry]:
        collection = self.generation_collection(name, generation)
        if not await self.vectors.exists(collection):
            return {}
        points = await self.vectors.retrieve(collection, [point_id(d, "0") for d in document_ids], [_STAMP])
        entries = [
            DocumentEntry.model_validate(p.payload[_STAMP])
            for p in points
            if p.payload and _STAMP in p.payload
        ]
        return {e.id: e for e in entries}

    async def revise_entries(
        self, name: str, generation: int, entries: Sequence[tuple[DocumentEntry, bool]]
    ) -> None:
        """Rewrites entries in place: registry points, or the payload of passage 0 for ``stamped`` ones.

        For a change that needs no new passages (a document read again with the same content).
        """
        await self.put_entries(name, [entry for entry, stamped in entries if not stamped])
        collection = self.generation_collection(name, generation)
        for entry, stamped in entries:
            if stamped:
                await self.vectors.set_payload(
                    collection,
                    [point_id(entry.id, "0")],
                    {_STAMP: entry.model_dump(mode="json", exclude_none=True)},
                )

    async def put_entries(self, name: str, entries: Iterable[DocumentEntry]) -> None:
        """Creates or replaces these documents' registry entries."""
        registry = self._registry(name)
        points = [Point(point_id("doc", e.id), _PLACEHOLDER, e.model_dump(mode="json")) for e in entries]
        if points:
            await self._ensure_payload_collection(registry)
            await self.vectors.upsert(registry, points)

    async def delete_entries(self, name: str, document_ids: Sequence[str]) -> None:
        """Removes these documents from the registry (their passages are deleted separately)."""
        if document_ids:
            await self.vectors.delete(self._registry(name), [point_id("doc", d) for d in document_ids])

    # ---- document list --------------------------------------------------------------------

    async def list_header(self, name: str) -> DocumentListHeader | None:
        """The header of the collection's document list, or None when it has none yet."""
        collection = self._list(name)
        if not await self.vectors.exists(collection):
            return None
        points = await self.vectors.retrieve(collection, [point_id("header")])
        return DocumentListHeader.model_validate(points[0].payload) if points else None

    async def put_list_header(self, name: str, header: DocumentListHeader) -> None:
        """Replaces the header: one point, so the list switches to its new pages in one write."""
        await self._put_list_point(name, point_id("header"), header.model_dump(mode="json"))

    async def list_page(self, name: str, page: str) -> list[str] | None:
        """The document ids of one page of the list, or None when no such page is stored."""
        collection = self._list(name)
        if not await self.vectors.exists(collection):
            return None
        points = await self.vectors.retrieve(collection, [point_id("page", page)], ["ids"])
        if not points or not points[0].payload:
            return None
        return zlib.decompress(base64.b64decode(points[0].payload["ids"])).decode().split("\0")

    async def put_list_page(self, name: str, page: str, document_ids: Sequence[str]) -> None:
        """Stores a page of the list under a name never used before (pages are not rewritten).

        The ids go compressed in one string (an id holds no NUL): local mode keeps every payload as
        Python objects, where 100 000 ids as strings of their own cost ~8 MB and packed ~1 MB.
        """
        packed = base64.b64encode(zlib.compress("\0".join(document_ids).encode())).decode()
        await self._put_list_point(name, point_id("page", page), {"page": page, "ids": packed})

    async def list_pages(self, name: str) -> list[str]:
        """The name of every page stored, current or left by a pass that did not finish."""
        collection = self._list(name)
        if not await self.vectors.exists(collection):
            return []
        pages = self._scroll_payloads(collection, None, ["page"])
        return [str(p["page"]) async for p in pages if "page" in p]

    async def delete_list_pages(self, name: str, pages: Sequence[str]) -> None:
        """Deletes pages of the list by name (those the header no longer names)."""
        if pages:
            await self.vectors.delete(self._list(name), [point_id("page", p) for p in pages])

    async def _put_list_point(self, name: str, point: str, payload: dict[str, Any]) -> None:
        collection = self._list(name)
        await self._ensure_payload_collection(collection)
        await self.vectors.upsert(collection, [Point(point, _PLACEHOLDER, payload)])

    async def _scroll_payloads(
        self,
        collection: str,
        condition: Where | None = None,
        fields: list[str] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        offset: str | None = None
        while True:
            points, offset = await self.vectors.scroll(
                collection,
                where=condition,
                limit=_SCROLL_PAGE,
                offset=offset,
                payload=fields if fields is not None else True,
            )
            for point in points:
                if point.payload:
                    yield point.payload
            if offset is None:
                return
