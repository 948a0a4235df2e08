"""One indexing pass over a declared collection, independent of Temporal (the activity wraps it).

A pass reads every source in full (a snapshot), compares content hashes with the registry, embeds
new or changed documents in calls of 64 passages, and deletes what no source yields any more. It
writes into a *target generation*: the current one when model and chunker are unchanged, else a new
one that the alias switches to once complete. Memory stays flat however large the sources: only
the registry's ids and hashes are held, and at most one batch of documents.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from chamvi.errors import ChamviError, InvalidAppError
from chamvi.knowledge.chunking import CHUNKER_VERSION, chunk
from chamvi.knowledge.collections import KnowledgeCollection
from chamvi.knowledge.documents import Document, InvalidDocumentError, content_hash, validate_item
from chamvi.knowledge.embedders import Embedder, EmbeddingHTTPError, EmbeddingRegistry
from chamvi.knowledge.sources import SourceContext
from chamvi.knowledge.state import CollectionMeta, CollectionStatus, DocumentEntry, PassStats
from chamvi.knowledge.store import KnowledgeStore, Passage

log = logging.getLogger("chamvi.knowledge")

BATCH_SIZE = 64
MAX_REASONS = 20
CALL_TIMEOUT_SECONDS = 60.0


class KnowledgePassError(ChamviError):
    """A pass that failed and will be tried again on the backoff."""

    code = "knowledge_pass_failed"


@dataclass(frozen=True)
class _Known:
    hash: str
    generation: int | None
    status: str
    trusted: bool


@dataclass
class _Pending:
    document: Document
    hash: str
    trusted: bool
    passages: list[str]


@dataclass
class _Batch:
    items: list[_Pending] = field(default_factory=list)

    @property
    def passages(self) -> int:
        return sum(len(i.passages) for i in self.items)


def _report(collection: str, kind: str, message: str) -> None:
    log.warning("knowledge source %s of %r: %s", kind, collection, message)


class Indexer:
    def __init__(
        self,
        store: KnowledgeStore,
        embedders: EmbeddingRegistry,
        *,
        batch_size: int = BATCH_SIZE,
        call_timeout: float = CALL_TIMEOUT_SECONDS,
    ) -> None:
        self.store = store
        self.embedders = embedders
        self.batch_size = batch_size
        self.call_timeout = call_timeout

    async def run_pass(
        self,
        collection: KnowledgeCollection,
        progress: Callable[[PassStats], None] = lambda _: None,
        cancellation: asyncio.Event | None = None,
    ) -> CollectionMeta:
        name = collection.name
        meta = await self.store.meta(name) or CollectionMeta(name=name, trusted=collection.is_trusted)
        if meta.kind == "managed":
            raise InvalidAppError(f"collection {name!r} is a managed collection: the code cannot declare it")
        embedder = self.embedders.resolve(collection.model)
        target = await self._target_generation(meta, collection.model)
        if meta.status == CollectionStatus.ORPHANED:
            meta.status = CollectionStatus.READY if meta.generation is not None else CollectionStatus.PENDING
        if meta.generation is not None and target != meta.generation:
            meta.status = CollectionStatus.STALE
        if not collection.is_trusted:
            meta.trusted = False  # a collection that becomes untrusted is untrusted at once
        await self.store.save_meta(meta)

        known: dict[str, _Known] = {
            e.id: _Known(e.hash, e.generation, e.status, e.trusted) async for e in self.store.entries(name)
        }
        stats = PassStats()
        seen: set[str] = set()
        batch = _Batch()
        incomplete = False
        for source in collection.sources:
            context = SourceContext(
                cancellation=cancellation or asyncio.Event(),
                on_error=functools.partial(_report, name, source.kind),
                incomplete=functools.partial(_report, name, source.kind),
            )
            trusted = collection.source_trusted(source)
            async for raw in source.documents(context):
                try:
                    document = validate_item(raw)
                except InvalidDocumentError as error:
                    context.on_error(error.message)
                    stats.skipped += 1
                    continue
                if document.id in seen:
                    context.on_error(
                        f"document {document.id!r} was yielded by an earlier source: keeping the first"
                    )
                    stats.skipped += 1
                    continue
                seen.add(document.id)
                stats.read += 1
                digest = content_hash(document)
                previous = known.get(document.id)
                if (
                    previous is not None
                    and previous.hash == digest
                    and previous.generation == target
                    and previous.status in ("ready", "failed")
                ):
                    stats.unchanged += 1
                    continue
                batch.items.append(_Pending(document, digest, trusted, chunk(document.content)))
                if batch.passages >= self.batch_size:
                    await self._flush(name, target, embedder, batch, known, stats)
                    batch = _Batch()
                    progress(stats)
            if context.is_incomplete:
                incomplete = True
                # reasons travel in the pass result through history: a few, not one per file
                stats.incomplete.extend(context.reasons[: max(0, MAX_REASONS - len(stats.incomplete))])
        await self._flush(name, target, embedder, batch, known, stats)
        progress(stats)

        if incomplete:
            log.warning("knowledge %r: the read was incomplete: nothing deleted", name)
        else:
            gone = sorted(set(known) - seen)
            for start in range(0, len(gone), 1000):
                await self._delete(name, meta, target, gone[start : start + 1000])
                for document_id in gone[start : start + 1000]:
                    known.pop(document_id, None)
            stats.deleted = len(gone)

        if target != meta.generation:
            if incomplete and meta.generation is not None:
                raise KnowledgePassError(
                    f"collection {name!r}: the read was incomplete, so generation {target} does not replace "
                    f"generation {meta.generation} yet"
                )
            await self._switch(meta, target, collection.model, embedder)
        meta.status = CollectionStatus.READY
        meta.trusted = collection.is_trusted and all(k.trusted for k in known.values())
        meta.documents = len(known)
        meta.passages = await self.store.count_passages(name, target)
        meta.last_pass = datetime.now(UTC)
        meta.last_stats = stats
        meta.error = None
        meta.next_attempt = None
        await self.store.save_meta(meta)
        return meta

    async def _target_generation(self, meta: CollectionMeta, model: str) -> int:
        """The generation this pass writes; an abandoned one is deleted, its number never reused."""
        if meta.generation is not None and meta.model == model and meta.chunker == CHUNKER_VERSION:
            target = meta.generation
        elif (
            meta.building is not None
            and meta.building_model == model
            and meta.building_chunker == CHUNKER_VERSION
        ):
            return meta.building
        else:
            target = meta.allocate_generation()
        if meta.building is not None and meta.building != target:
            await self.store.delete_generation(meta.name, meta.building)
        meta.building = None if target == meta.generation else target
        meta.building_model = None if meta.building is None else model
        meta.building_chunker = None if meta.building is None else CHUNKER_VERSION
        return target

    async def _switch(self, meta: CollectionMeta, target: int, model: str, embedder: Embedder) -> None:
        if not await self.store.generation_exists(meta.name, target):
            probe = await self._embed(embedder, ["dimension probe"])
            await self.store.ensure_generation(meta.name, target, len(probe[0]))
        await self.store.switch_alias(meta.name, target)
        previous = meta.generation
        meta.generation, meta.model, meta.chunker = target, model, CHUNKER_VERSION
        meta.building = meta.building_model = meta.building_chunker = None
        if previous is not None and previous != target:
            await self.store.delete_generation(meta.name, previous)

    async def _delete(self, name: str, meta: CollectionMeta, target: int, document_ids: list[str]) -> None:
        for generation in {target, meta.generation} - {None}:
            await self.store.delete_passages(name, generation, document_ids)  # type: ignore[arg-type]
        await self.store.delete_entries(name, document_ids)

    async def _embed(self, embedder: Embedder, texts: list[str]) -> list[list[float]]:
        try:
            return await asyncio.wait_for(embedder.embed(texts), timeout=self.call_timeout)
        except TimeoutError:
            raise KnowledgePassError(
                f"the embedding model did not answer within {self.call_timeout:g} s"
            ) from None

    async def _flush(
        self,
        name: str,
        target: int,
        embedder: Embedder,
        batch: _Batch,
        known: dict[str, _Known],
        stats: PassStats,
    ) -> None:
        if not batch.items:
            return
        texts = [text for item in batch.items for text in item.passages]
        try:
            vectors = await self._embed_all(embedder, texts, stats)
        except EmbeddingHTTPError as error:
            if not error.document_level or len(batch.items) == 1:
                if error.document_level:
                    await self._fail(name, target, batch.items[0], str(error), known, stats)
                    return
                raise
            for item in batch.items:  # find the documents the provider refuses, one by one
                await self._flush(name, target, embedder, _Batch([item]), known, stats)
            return
        if vectors:
            await self.store.ensure_generation(name, target, len(vectors[0]))
        passages: list[Passage] = []
        for item in batch.items:
            doc = item.document
            passages.extend(
                Passage(doc.id, index, text, doc.title, doc.source)
                for index, text in enumerate(item.passages)
            )
        await self.store.write_passages(name, target, passages, vectors)
        now = datetime.now(UTC)
        await self.store.put_entries(
            name,
            [
                DocumentEntry(
                    id=item.document.id,
                    hash=item.hash,
                    generation=target,
                    status="ready",
                    passages=len(item.passages),
                    title=item.document.title,
                    source=item.document.source,
                    metadata=item.document.metadata,
                    trusted=item.trusted,
                    updated_at=now,
                )
                for item in batch.items
            ],
        )
        for item in batch.items:
            known[item.document.id] = _Known(item.hash, target, "ready", item.trusted)
        stats.embedded += len(batch.items)
        stats.passages += len(texts)

    async def _embed_all(self, embedder: Embedder, texts: list[str], stats: PassStats) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._embed(embedder, texts[start : start + self.batch_size]))
            stats.embedding_calls += 1
        return vectors

    async def _fail(
        self, name: str, target: int, item: _Pending, error: str, known: dict[str, _Known], stats: PassStats
    ) -> None:
        """The provider refused this document (400/413/422): it fails alone, tried again when it changes."""
        log.warning("knowledge %r: document %r failed: %s", name, item.document.id, error)
        entry = DocumentEntry(
            id=item.document.id,
            hash=item.hash,
            generation=target,
            status="failed",
            error=error,
            title=item.document.title,
            source=item.document.source,
            metadata=item.document.metadata,
            trusted=item.trusted,
            updated_at=datetime.now(UTC),
        )
        await self.store.put_entries(name, [entry])
        known[item.document.id] = _Known(item.hash, entry.generation, "failed", item.trusted)
        stats.failed += 1
