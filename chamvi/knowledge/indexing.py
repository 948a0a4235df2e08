"""One indexing pass over a declared collection, independent of Temporal (the activity wraps it).

A pass reads every source in full (a snapshot), compares content hashes with the registry, embeds
new or changed documents in calls of 64 passages, and deletes what no source yields any more. It
writes into a *target generation*: the current one when model and chunker are unchanged, else a new
one that the alias switches to once complete.

A pass writes only what changed: an unchanged document costs a lookup, no write (in Qdrant's local
mode on disk every point written is a SQLite transaction). To find what is gone it keeps the ids it
read in a ``SeenIds`` (about 8 bytes each) and afterwards walks the collection's document list
(``_listing``) a page at a time, or scans the registry and the generation when the list cannot tell;
so memory stays bounded however large the sources: that set, one lookup chunk, one batch, one page.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from temporalio.common import RetryPolicy

from chamvi.errors import (
    InvalidAppError,
    InvalidDocumentError,
    KnowledgePassError,
    ProviderHTTPError,
    ProviderUnavailableError,
)
from chamvi.knowledge._listing import DocumentList
from chamvi.knowledge._seen import SeenIds
from chamvi.knowledge._window import (
    EMBEDDING_CONCURRENCY,
    MAX_RATE_LIMIT_WAIT,
    RATE_LIMIT_RETRIES,
    EmbeddingWindow,
    RatePause,
)
from chamvi.knowledge.chunking import CHUNKER_VERSION, chunk
from chamvi.knowledge.collections import DEFAULT_SEARCH, KnowledgeCollection, SearchMode
from chamvi.knowledge.documents import Document, content_hash, validate_item
from chamvi.knowledge.embedders import Embedder, EmbeddingRegistry
from chamvi.knowledge.index import KnowledgeIndex, Passage, point_id
from chamvi.knowledge.sources import SourceContext, StoredVersion
from chamvi.knowledge.sparse import SPARSE_ENCODER
from chamvi.models.knowledge import CollectionMeta, CollectionStatus, DocumentEntry, PassStats
from chamvi.retry import DEFAULT_EMBEDDING_RETRY, call_with_retry

log = logging.getLogger(__name__)

BATCH_SIZE = 64
MAX_REASONS = 20
CALL_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class _Known:
    hash: str
    generation: int | None
    status: str
    trusted: bool
    passages: int = 0
    stamped: bool = False
    """Kept on the document's first passage in ``generation`` rather than as a registry point."""


@dataclass
class _Pending:
    document: Document
    hash: str
    trusted: bool
    passages: list[str]
    previous: _Known | None = None


@dataclass
class _Tally:
    """What the target generation holds of the documents this pass read, counted as it goes.

    When the read was complete these are the collection's figures once the unseen documents are
    deleted, so the pass need not count them in Qdrant (a filtered count scans every point in local
    mode); and when Qdrant's plain counts match them, nothing unseen is left to delete.
    """

    documents: int = 0
    registered: int = 0
    """Documents whose entry is a registry point (the rest keep it on their first passage)."""
    passages: int = 0
    untrusted: int = 0

    def add(self, passages: int, trusted: bool, registered: bool) -> None:
        self.documents += 1
        self.passages += passages
        self.untrusted += not trusted
        self.registered += registered


@dataclass
class _Pass:
    """What one pass writes into, shared by its batches."""

    name: str
    target: int
    embedder: Embedder
    stats: PassStats
    managed: bool = False
    sparse: bool = False
    """The target is a hybrid generation: passages are written with their BM25 vectors too."""
    tally: _Tally = field(default_factory=_Tally)
    expected: SeenIds | None = None
    """The point id of every passage the target holds for the documents read (8 bytes each), kept
    only when the document list cannot tell what is gone: the scan alone reads it, and a point id
    per passage was most of what an unchanged document cost a no-op pass beyond its lookup."""
    listing: DocumentList | None = None
    """The document list of a declared collection (a managed one has none)."""
    window: EmbeddingWindow = field(default_factory=lambda: EmbeddingWindow(EMBEDDING_CONCURRENCY))
    """The embedding calls in flight (``chamvi.knowledge._window``)."""
    pause: RatePause = field(default_factory=RatePause)

    def holds(
        self, document: str, passages: int, trusted: bool, registered: bool, *, new: bool = False
    ) -> None:
        """Counts a document read that the target holds with ``passages`` passages.

        ``new``: the pass found no entry for it (the document list may not name it yet).
        """
        self.tally.add(passages, trusted, registered)
        if self.expected is not None:
            for index in range(passages):
                self.expected.add(point_id(document, str(index)))
        if self.listing is not None:
            self.listing.record(document, new=new)


@dataclass
class _Batch:
    """Documents waiting for their vectors.

    ``vectors`` holds those of the leading passages already embedded, since a call of 64 passages
    may end inside a document.
    """

    items: list[_Pending] = field(default_factory=list)
    vectors: list[list[float]] = field(default_factory=list)
    requested: int = 0
    """How many leading passages were sent to be embedded (landed in ``vectors``, or in flight)."""
    passages: int = 0
    """How many passages ``items`` hold (kept, not summed: a batch is asked after every item)."""

    def __post_init__(self) -> None:
        self.passages = sum(len(i.passages) for i in self.items)

    def add(self, item: _Pending) -> None:
        """Queues one more document for embedding."""
        self.items.append(item)
        self.passages += len(item.passages)

    def take(self, done: int, embedded: int) -> None:
        """Drops the ``done`` leading documents, written with their ``embedded`` passages."""
        del self.items[:done]
        del self.vectors[:embedded]
        self.requested -= embedded
        self.passages -= embedded

    def clear(self) -> list[_Pending]:
        """Empties the batch, answering the documents it held."""
        items, self.items, self.vectors, self.requested, self.passages = self.items, [], [], 0, 0
        return items

    @property
    def unrequested(self) -> int:
        return self.passages - self.requested


LOOKUP_CHUNK = 256
_DUPLICATE = "document {!r} was yielded by an earlier source: keeping the first"


def _entry(
    run: _Pass,
    item: _Pending,
    status: Literal["ready", "failed"],
    passages: int,
    now: datetime,
    error: str | None = None,
) -> DocumentEntry:
    """What the registry keeps of a document this pass embedded (or that failed).

    A managed collection keeps its content too, since its pass embeds from the registry.
    """
    return DocumentEntry(
        id=item.document.id,
        hash=item.hash,
        generation=run.target,
        status=status,
        error=error,
        passages=passages,
        title=item.document.title,
        source=item.document.source,
        metadata=item.document.metadata,
        trusted=item.trusted,
        content=item.document.content if run.managed else None,
        updated_at=now,
        version=item.document.version,
    )


def _sparse_for(search: SearchMode) -> int | None:
    """The sparse encoder version a generation of this mode is written with (None: dense only)."""
    return SPARSE_ENCODER if search == "hybrid" else None


def _sparse_of(meta: CollectionMeta, generation: int) -> int | None:
    """The sparse encoder version of ``generation``: the one searches read, or the one being built."""
    return meta.building_sparse if generation == meta.building else meta.sparse


def _known(entry: DocumentEntry, stamped: bool = False) -> _Known:
    return _Known(entry.hash, entry.generation, entry.status, entry.trusted, entry.passages, stamped)


@dataclass
class _Reading:
    """What a pass has read: every id (compactly), the chunk not yet compared, the batch not yet embedded."""

    run: _Pass
    seen: SeenIds = field(default_factory=SeenIds)
    """Each document read: the document list, or a scan, then tells which stored ones were not."""
    waiting: list[tuple[Document, str, bool]] = field(default_factory=list)
    batch: _Batch = field(default_factory=lambda: _Batch())


def _offsets(items: list[_Pending]) -> dict[str, int]:
    """Where each document's passages start in the batch's vectors."""
    offsets: dict[str, int] = {}
    position = 0
    for item in items:
        offsets[item.document.id] = position
        position += len(item.passages)
    return offsets


def _report(collection: str, kind: str, message: str) -> None:
    log.warning("knowledge source %s of %r: %s", kind, collection, message)


def _skip(stats: PassStats, collection: str, kind: str, message: str) -> None:
    """Counts a document or entry the pass leaves out, and logs why.

    Counted in the stats because people read those, not the worker's log; whether the source reported
    it or the pass refused what the source yielded.
    """
    stats.skipped += 1
    _note(stats, message)
    _report(collection, kind, message)


def _note(stats: PassStats, message: str) -> None:
    """Keeps why a document was left out in the pass's report; a few reasons, not one per file."""
    if len(stats.problems) < MAX_REASONS:
        stats.problems.append(message)


class Indexer:
    """Runs indexing passes, declared and managed, independent of Temporal.

    The ``chamvi.knowledge_pass`` activity holds one and wraps each pass.

    Args:
        store: the Qdrant knowledge index passes read and write.
        embedders: resolves a collection's model name to its embedder.
        batch_size: passages per embedding call.
        call_timeout: seconds one embedding call may take before it is retried.
        retry: the retry policy of one embedding call, applied inside the pass.
        concurrency: embedding calls in flight at once in a pass, where the collection does not
            say (``knowledge_collection(embedding_concurrency=)``; managed collections use this).
        rate_limit_retries: times one call is tried again after a 429, beyond ``retry``.
    """

    def __init__(
        self,
        store: KnowledgeIndex,
        embedders: EmbeddingRegistry,
        *,
        batch_size: int = BATCH_SIZE,
        call_timeout: float = CALL_TIMEOUT_SECONDS,
        retry: RetryPolicy = DEFAULT_EMBEDDING_RETRY,
        concurrency: int = EMBEDDING_CONCURRENCY,
        rate_limit_retries: int = RATE_LIMIT_RETRIES,
    ) -> None:
        self.store = store
        self.embedders = embedders
        self.batch_size = batch_size
        self.call_timeout = call_timeout
        self.retry = retry
        self.concurrency = concurrency
        self.rate_limit_retries = rate_limit_retries

    async def run_pass(
        self,
        collection: KnowledgeCollection,
        progress: Callable[[PassStats], None] = lambda _: None,
        cancellation: asyncio.Event | None = None,
    ) -> CollectionMeta:
        """One pass over a declared collection: read its sources, embed what changed, delete what is gone.

        Args:
            collection: the collection as the app declares it.
            progress: called with the running counts as batches finish (the activity heartbeats them).
            cancellation: set to make the sources stop reading early.

        Returns:
            The collection's meta after the pass, as stored.

        Raises:
            InvalidAppError: the name belongs to a managed collection.
            ModelNotFoundError: no provider serves the collection's model.
            KnowledgePassError: the read was incomplete, so a new generation cannot replace the current one.
        """
        name = collection.name
        meta = await self.store.meta(name) or CollectionMeta(name=name, trusted=collection.is_trusted)
        if meta.kind == "managed":
            raise InvalidAppError(f"collection {name!r} is a managed collection: the code cannot declare it")
        embedder = self.embedders.resolve(collection.model)
        target = await self._target_generation(meta, collection.model, collection.search)
        if meta.status == CollectionStatus.ORPHANED:
            meta.status = CollectionStatus.READY if meta.generation is not None else CollectionStatus.PENDING
        if meta.generation is not None and target != meta.generation:
            meta.status = CollectionStatus.STALE
        if not collection.is_trusted:
            meta.trusted = False  # a collection that becomes untrusted is untrusted at once
        await self.store.save_meta(meta)

        meta.passes += 1
        await self.store.save_meta(meta)
        stats = PassStats()
        listing = await DocumentList.open(self.store, meta, target)
        expected = None if listing.exact else SeenIds()
        run = _Pass(name, target, embedder, stats, listing=listing, expected=expected)
        run.sparse = _sparse_of(meta, target) is not None
        run.window = EmbeddingWindow(collection.embedding_concurrency or self.concurrency)
        try:
            return await self._read(collection, meta, run, progress, cancellation)
        finally:
            await run.window.close()

    async def _read(
        self,
        collection: KnowledgeCollection,
        meta: CollectionMeta,
        run: _Pass,
        progress: Callable[[PassStats], None],
        cancellation: asyncio.Event | None,
    ) -> CollectionMeta:
        """The rest of ``run_pass``: read, embed, delete what is gone, switch, settle."""
        name, target, embedder, stats = collection.name, run.target, run.embedder, run.stats
        reading = _Reading(run)
        incomplete = False
        for source in collection.sources:
            trusted = collection.source_trusted(source)
            context = SourceContext(
                cancellation=cancellation or asyncio.Event(),
                on_error=functools.partial(_skip, stats, name, source.kind),
                incomplete=functools.partial(_report, name, source.kind),
                unchanged=functools.partial(self._unchanged, reading),
                stored=functools.partial(self._stored, reading),
                record_failure=functools.partial(self._failed_read, reading, trusted),
            )
            async for raw in source.documents(context):
                try:
                    document = validate_item(raw)
                except InvalidDocumentError as error:
                    context.on_error(error.message)
                    continue
                if not reading.seen.add(document.id):
                    context.on_error(_DUPLICATE.format(document.id))
                    continue
                stats.read += 1
                reading.waiting.append((document, content_hash(document), trusted))
                if len(reading.waiting) >= LOOKUP_CHUNK:
                    await self._compare(reading, progress)
            if context.is_incomplete:
                incomplete = True
                # reasons travel in the pass result through history: a few, not one per file
                stats.incomplete.extend(context.reasons[: max(0, MAX_REASONS - len(stats.incomplete))])
        await self._compare(reading, progress)
        await self._flush(run, reading.batch, final=True)
        progress(stats)

        listing = run.listing
        assert listing is not None
        if incomplete:
            log.warning("knowledge %r: the read was incomplete: nothing deleted", name)
            await listing.keep_unread()
        elif not await listing.delete_unread(
            reading.seen, run.tally.documents, functools.partial(self._delete_listed, run)
        ):
            await self._delete_unseen(meta, run, reading.seen)
            await listing.relist()

        if target != meta.generation:
            if incomplete and meta.generation is not None:
                raise KnowledgePassError(
                    f"collection {name!r}: the read was incomplete, so generation {target} does not replace "
                    f"generation {meta.generation} yet"
                )
            await self._switch(meta, target, collection.model, embedder)
        if incomplete:
            documents = await self.store.count_entries(name, meta.generation)
            untrusted = await self.store.count_entries(name, meta.generation, untrusted=True)
        else:
            documents, untrusted = run.tally.documents, run.tally.untrusted
        meta.trusted = collection.is_trusted and untrusted == 0
        return await self._settle(meta, run, documents)

    async def _stored(self, reading: _Reading, ids: list[str]) -> dict[str, StoredVersion]:
        """The version and metadata of each of these documents that ``_unchanged`` would accept."""
        run = reading.run
        found = await self.store.find_entries(run.name, ids, run.target)
        answer: dict[str, StoredVersion] = {}
        for document in ids:
            stored = found.get(document)
            entry = stored.entry if stored is not None else None
            if (
                entry is not None
                and entry.version is not None
                and entry.generation == run.target
                and entry.status in ("ready", "failed")
            ):
                answer[document] = StoredVersion(entry.version, entry.metadata)
        return answer

    async def _unchanged(self, reading: _Reading, versions: list[tuple[str, str]]) -> set[str]:
        """The documents whose stored entry has this version: counted read and unchanged, unread.

        A document some earlier source yielded is left out, so the source yields it and the pass
        reports the duplicate.
        """
        run = reading.run
        found = await self.store.find_entries(run.name, [d for d, _ in versions], run.target)
        unchanged: set[str] = set()
        for document, version in versions:
            stored = found.get(document)
            entry = stored.entry if stored is not None else None
            if (
                stored is None
                or entry is None
                or entry.version != version
                or entry.generation != run.target
                or entry.status not in ("ready", "failed")
                or not reading.seen.add(document)
            ):
                continue
            run.stats.read += 1
            run.stats.unchanged += 1
            run.stats.not_read += 1
            run.holds(document, entry.passages, entry.trusted, registered=not stored.stamped)
            unchanged.add(document)
        await self._spill(run)
        return unchanged

    async def _compare(self, reading: _Reading, progress: Callable[[PassStats], None]) -> None:
        """Compares a chunk of read documents with their registry entries, one lookup per chunk.

        One lookup per chunk keeps memory flat however large the sources. Unchanged documents cost
        nothing more; the rest are batched for embedding.
        """
        run = reading.run
        previous = await self.store.find_entries(run.name, [d.id for d, _, _ in reading.waiting], run.target)
        revised: list[tuple[DocumentEntry, bool]] = []
        for document, digest, trusted in reading.waiting:
            stored = previous.get(document.id)
            entry = stored.entry if stored is not None else None
            if (
                entry is not None
                and entry.hash == digest
                and entry.generation == run.target
                and entry.status in ("ready", "failed")
            ):
                run.stats.unchanged += 1
                assert stored is not None
                run.holds(document.id, entry.passages, entry.trusted, registered=not stored.stamped)
                if entry.version != document.version:  # touched, or read before versions were kept
                    revised.append((entry.model_copy(update={"version": document.version}), stored.stamped))
                continue
            known = _known(entry, stored.stamped) if stored is not None and entry is not None else None
            reading.batch.add(_Pending(document, digest, trusted, chunk(document.content), known))
            if reading.batch.unrequested >= self.batch_size:
                await self._flush(run, reading.batch)
                progress(run.stats)
        reading.waiting.clear()
        if revised:
            await self.store.revise_entries(run.name, run.target, revised)
        await self._spill(run)

    @staticmethod
    async def _spill(run: _Pass) -> None:
        if run.listing is not None:
            await run.listing.spill()

    async def _delete_unseen(self, meta: CollectionMeta, run: _Pass, seen: SeenIds) -> None:
        """Deletes the documents no source yielded in this pass, scanning a page at a time.

        The registry's points by their ids, then the passages of each generation the pass touches
        (the target, and the current one while a new generation is built) by point id alone: a
        passage the pass expects is kept; of the others, those of a document not read are deleted
        (in the target, any other too: a passage past its document's count is a leftover).
        """
        if meta.generation in (None, run.target) and await self._nothing_unseen(run):
            return
        deleted = SeenIds()  # a document held in two places is counted once
        async for registered in self.store.registry_ids(run.name):
            gone = [d for d in registered if d not in seen]
            await self.store.delete_entries(run.name, gone)
            run.stats.deleted += sum(deleted.add(d) for d in gone)
        expected = run.expected if run.expected is not None else await self._held(run, seen)
        for generation in sorted(g for g in {run.target, meta.generation} if g is not None):
            async for ids in self.store.passage_ids(run.name, generation):
                unexpected = [i for i in ids if i not in expected]
                documents = await self.store.passage_documents(run.name, generation, unexpected)
                unread = {i: d for i, d in documents.items() if d not in seen}
                await self.store.delete_points(
                    run.name, generation, list(documents if generation == run.target else unread)
                )
                run.stats.deleted += sum(deleted.add(d) for d in unread.values())

    async def _held(self, run: _Pass, seen: SeenIds) -> SeenIds:
        """The point ids of the passages the target holds of the documents read, from their entries.

        For a scan that the pass did not keep them for (the document list was exact, but a page it
        names is missing): every document written or found unchanged has its entry, with its count.
        """
        held = SeenIds()
        async for entry in self.store.entries(run.name):
            if entry.generation == run.target and entry.id in seen:
                for index in range(entry.passages):
                    held.add(point_id(entry.id, str(index)))
        return held

    async def _delete_listed(self, run: _Pass, documents: list[str]) -> None:
        """Deletes listed documents the pass did not read; those without an entry are gone already.

        Passages go first, each document's first one last (it may keep the entry), then registry
        points: a pass killed halfway leaves every document it had not finished with its entry, so
        the next one finds and deletes it.
        """
        if not documents:
            return
        found = await self.store.find_entries(run.name, documents, run.target)
        target = {d: s.entry.passages for d, s in found.items() if s.entry.generation == run.target}
        passages = {d: range(count - 1, -1, -1) for d, count in target.items()}
        await self.store.delete_passage_points(run.name, run.target, passages)
        await self.store.delete_entries(run.name, [d for d, s in found.items() if not s.stamped])
        run.stats.deleted += len(found)

    async def _nothing_unseen(self, run: _Pass) -> bool:
        """Whether the registry and the target hold exactly what this pass read: two plain counts.

        Each registry point is one document, and each passage belongs to one: if the counts equal
        those of the documents read, no other document is left (a mismatch only means a scan).
        """
        registered = await self.store.count_entries(run.name, None)
        return (
            registered == run.tally.registered
            and await self.store.count_passages(run.name, run.target) == run.tally.passages
        )

    async def run_managed_pass(
        self, name: str, progress: Callable[[PassStats], None] = lambda _: None
    ) -> CollectionMeta | None:
        """Embeds a managed collection's pending documents from the content kept in its registry.

        When a sync asked for another model or chunker, every document is embedded into a new
        generation instead. A collection deleted meanwhile (None) or not managed is returned as is.
        """
        meta = await self.store.meta(name)
        if meta is None or meta.kind != "managed":
            return meta  # deleted meanwhile: nothing to do
        model = meta.managed_model or meta.model
        if model is None:
            raise InvalidAppError(f"managed collection {name!r} has no embedding model")
        embedder = self.embedders.resolve(model)
        target = await self._target_generation(meta, model)
        if meta.generation is not None and target != meta.generation:
            meta.status = CollectionStatus.STALE
        await self.store.save_meta(meta)
        stats = PassStats()
        run = _Pass(name, target, embedder, stats, managed=True, sparse=_sparse_of(meta, target) is not None)
        run.window = EmbeddingWindow(self.concurrency)
        try:
            batch = _Batch()
            async for entry in self.store.entries(name):
                stats.read += 1
                if entry.status != "pending" and entry.generation == target:
                    stats.unchanged += 1
                    continue
                document = Document(entry.id, entry.content or "", entry.title, entry.source, entry.metadata)
                batch.add(_Pending(document, entry.hash, False, chunk(document.content), _known(entry)))
                if batch.unrequested >= self.batch_size:
                    await self._flush(run, batch)
                    progress(stats)
            await self._flush(run, batch, final=True)
            progress(stats)
            if await self.store.meta(name) is None:
                # deleted over REST during the pass: saving the meta now would bring the collection back
                if target != meta.generation:
                    await self.store.delete_generation(name, target)
                return None
            if target != meta.generation:
                await self._switch(meta, target, model, embedder)
            meta.trusted = False  # whoever holds knowledge:write decides what it says
            return await self._settle(meta, run)
        finally:
            await run.window.close()

    async def _settle(self, meta: CollectionMeta, run: _Pass, documents: int | None = None) -> CollectionMeta:
        meta.status = CollectionStatus.READY
        if documents is None:
            documents = await self.store.count_entries(meta.name, meta.generation)
        meta.documents = documents
        meta.passages = await self.store.count_passages(meta.name, run.target)
        meta.last_pass = datetime.now(UTC)
        meta.last_stats = run.stats
        meta.error = None
        meta.next_attempt = None
        await self.store.save_meta(meta)
        if meta.generation is not None:
            await self.store.optimize(meta.name, meta.generation)
        return meta

    async def _target_generation(
        self, meta: CollectionMeta, model: str, search: SearchMode | None = None
    ) -> int:
        """The generation this pass writes; an abandoned one is deleted, its number never reused.

        A generation fits when its model, chunker and search mode are the ones asked for; a
        ``search`` of None takes the mode of a fitting generation, whichever it is, and gives a new
        one ``DEFAULT_SEARCH``. So a collection indexed before hybrid search keeps its generation. A
        current generation whose collection is gone (a damaged shard deleted to rebuild it, see
        ``StoreDamagedError``) fits no more: every document is embedded again, into a new one.
        """

        def fits(model_: str | None, chunker: int | None, sparse: int | None) -> bool:
            if model_ != model or chunker != CHUNKER_VERSION:
                return False
            if search is None:
                return sparse in (None, SPARSE_ENCODER)
            return sparse == _sparse_for(search)

        if (
            meta.generation is not None
            and fits(meta.model, meta.chunker, meta.sparse)
            and await self.store.generation_exists(meta.name, meta.generation)
        ):
            target = meta.generation
        elif meta.building is not None and fits(
            meta.building_model, meta.building_chunker, meta.building_sparse
        ):
            return meta.building
        else:
            target = meta.allocate_generation()
        if meta.building is not None and meta.building != target:
            await self.store.delete_generation(meta.name, meta.building)
        meta.building = None if target == meta.generation else target
        meta.building_model = None if meta.building is None else model
        meta.building_chunker = None if meta.building is None else CHUNKER_VERSION
        meta.building_sparse = None if meta.building is None else _sparse_for(search or DEFAULT_SEARCH)
        return target

    async def _switch(self, meta: CollectionMeta, target: int, model: str, embedder: Embedder) -> None:
        sparse = _sparse_of(meta, target)
        if not await self.store.generation_exists(meta.name, target):
            probe = await self._embed(embedder, ["dimension probe"])
            await self.store.ensure_generation(meta.name, target, len(probe[0]), sparse=sparse is not None)
        await self.store.switch_alias(meta.name, target)
        previous = meta.generation
        meta.generation, meta.model, meta.chunker, meta.sparse = target, model, CHUNKER_VERSION, sparse
        meta.building = meta.building_model = meta.building_chunker = meta.building_sparse = None
        if previous is not None and previous != target:
            await self.store.delete_generation(meta.name, previous)

    async def _embed(
        self, embedder: Embedder, texts: list[str], pause: RatePause | None = None
    ) -> list[list[float]]:
        """One embedding call under the retry policy; a 429 waits (the whole pass with it) and tries again."""
        limited = 0
        while True:
            if pause is not None:
                await pause.wait()
            try:
                return await call_with_retry(lambda: self._embed_once(embedder, texts), self.retry)
            except ProviderUnavailableError as error:
                if error.status != 429 or limited >= self.rate_limit_retries:
                    raise
                limited += 1
                delay = error.retry_after
                if delay is None:
                    delay = min(2.0 ** (limited - 1), MAX_RATE_LIMIT_WAIT)
                log.info("knowledge: the embedding provider is rate limiting: waiting %.1f s", delay)
                if pause is None:
                    await asyncio.sleep(delay)
                else:
                    pause.hold(delay)

    async def _embed_once(self, embedder: Embedder, texts: list[str]) -> list[list[float]]:
        try:
            return await asyncio.wait_for(embedder.embed(texts), timeout=self.call_timeout)
        except TimeoutError:
            raise KnowledgePassError(
                f"the embedding model did not answer within {self.call_timeout:g} s"
            ) from None

    async def _flush(self, run: _Pass, batch: _Batch, *, final: bool = False) -> None:
        """Sends passages in calls of exactly ``batch_size``, writing each document once fully embedded.

        Up to ``run.window.size`` calls are in flight (``chamvi.knowledge._window``); their vectors
        land in the order the calls were sent. The rest of the passages wait in ``batch`` for the
        next call. So a pass makes ceil(passages / batch_size) calls (with a hosted API each call
        costs latency and rate limit); ``final`` sends the remainder too, in one shorter call, and
        lands every call.
        """
        try:
            await self._send(run, batch, final)
        except ProviderHTTPError as error:
            if not error.input_refused:
                raise
            await run.window.close()
            items = batch.clear()
            if len(items) == 1:
                await self._fail(run, items[0], str(error))
                return
            for item in items:  # find the documents the provider refuses, one by one
                await self._flush(run, _Batch([item]), final=True)

    async def _send(self, run: _Pass, batch: _Batch, final: bool) -> None:
        texts = [text for item in batch.items for text in item.passages][batch.requested :]
        upto = len(texts) if final else len(texts) - len(texts) % self.batch_size
        for start in range(0, upto, self.batch_size):
            while run.window.full:
                if not run.window.ready:
                    await run.window.wait()
                while run.window.ready:
                    await self._land(run, batch)
            part = texts[start : start + self.batch_size]
            run.window.send(self._embed(run.embedder, part, run.pause))
            batch.requested += len(part)
            # written once the next call is on its way, so the window stays full meanwhile
            await self._write_embedded(run, batch)
        while final and len(run.window):
            await self._land(run, batch)
            await self._write_embedded(run, batch)
        if final:  # documents without passages after the last call: no call lands to write them
            await self._write_embedded(run, batch)

    async def _land(self, run: _Pass, batch: _Batch) -> None:
        """Takes the oldest call's vectors (``_write_embedded`` writes the documents they complete)."""
        batch.vectors.extend(await run.window.land())
        run.stats.embedding_calls += 1

    async def _write_embedded(self, run: _Pass, batch: _Batch) -> None:
        """Writes the leading documents of ``batch`` whose passages all have their vectors."""
        done = 0
        embedded = 0
        for item in batch.items:
            if embedded + len(item.passages) > len(batch.vectors):
                break
            embedded += len(item.passages)
            done += 1
        if done:
            await self._write(run, batch.items[:done], batch.vectors[:embedded])
            batch.take(done, embedded)

    async def _write(self, run: _Pass, written: list[_Pending], vectors: list[list[float]]) -> None:
        """Writes embedded documents: passages and their entries together, one upsert per batch.

        A declared document with passages keeps its entry on its first passage (no registry point to
        write); a managed one, or one without passages, in the registry.
        """
        if vectors:
            await self.store.ensure_generation(run.name, run.target, len(vectors[0]), sparse=run.sparse)
        items = await self._still_current(run, written) if run.managed else written
        if run.listing is not None and any(item.previous is None for item in items):
            await run.listing.touch()
        passages: list[Passage] = []
        kept_vectors: list[list[float]] = []
        offsets = _offsets(written)
        for item in items:
            doc = item.document
            start = offsets[doc.id]
            passages.extend(
                Passage(doc.id, i, text, doc.title, doc.source) for i, text in enumerate(item.passages)
            )
            kept_vectors.extend(vectors[start : start + len(item.passages)])
        now = datetime.now(UTC)
        entries = [_entry(run, item, "ready", len(item.passages), now) for item in items]
        stamped = [e for e in entries if not run.managed and e.passages]
        await self.store.delete_passage_points(run.name, run.target, self._outgrown(run, items))
        await self.store.write_passages(
            run.name, run.target, passages, kept_vectors, stamped, sparse=run.sparse
        )
        await self.store.put_entries(run.name, [e for e in entries if run.managed or not e.passages])
        # a document's entry is in one place only: drop the registry points the stamps replace
        replaced = [
            e.id
            for e, item in zip(entries, items, strict=True)
            if e.passages and not run.managed and item.previous is not None and not item.previous.stamped
        ]
        await self.store.delete_entries(run.name, replaced)
        for item in items:
            registered = run.managed or not item.passages
            new = item.previous is None
            run.holds(item.document.id, len(item.passages), item.trusted, registered, new=new)
        run.stats.embedded += len(items)
        run.stats.passages += len(passages)

    @staticmethod
    def _outgrown(run: _Pass, items: list[_Pending]) -> dict[str, range]:
        """Passages of the previous content past the new content's count, to delete by point id.

        The upsert overwrites the rest (point ids are document and index), so no delete has to scan
        the collection.
        """
        outgrown: dict[str, range] = {}
        for item in items:
            previous = item.previous
            if (
                previous is not None
                and previous.generation == run.target
                and previous.passages > len(item.passages)
            ):
                outgrown[item.document.id] = range(len(item.passages), previous.passages)
        return outgrown

    async def _still_current(self, run: _Pass, items: list[_Pending]) -> list[_Pending]:
        """The items whose registry entry still holds the content that was embedded.

        A managed document may have been replaced or deleted over REST while it was embedded: those
        results are dropped (a replaced one is pending again and its PUT asked for a pass).
        """
        current: list[_Pending] = []
        for item in items:
            entry = await self.store.entry(run.name, item.document.id)
            if entry is not None and entry.hash == item.hash:
                current.append(item)
        return current

    async def _fail(self, run: _Pass, item: _Pending, error: str) -> None:
        """Records a document the provider refused (400/413/422), so it fails alone, not the pass.

        It is tried again when it changes (or, in a managed collection, with its next PUT).
        """
        if run.managed and not await self._still_current(run, [item]):
            return
        log.warning("knowledge %r: document %r failed: %s", run.name, item.document.id, error)
        _note(run.stats, f"document {item.document.id!r} failed: {error}")
        await self._keep_failed(run, item, error)
        run.stats.failed += 1

    async def _failed_read(self, reading: _Reading, trusted: bool, document: Document, reason: str) -> None:
        """Keeps a document a source skipped past a limit as failed, with ``reason`` (``ctx.failed``).

        Counted skipped (the source reported it), never embedded; seen, so the pass does not delete
        its entry. Read again by the next pass, which skips it again unless it changed.
        """
        run = reading.run
        if not reading.seen.add(document.id):
            return  # an earlier source yielded it: that one is kept
        stored = (await self.store.find_entries(run.name, [document.id], run.target)).get(document.id)
        entry = stored.entry if stored is not None else None
        known = _known(entry, stored.stamped) if stored is not None and entry is not None else None
        await self._keep_failed(run, _Pending(document, content_hash(document), trusted, [], known), reason)

    async def _keep_failed(self, run: _Pass, item: _Pending, error: str) -> None:
        """The registry entry of a failed document; the passages of its previous content stay."""
        previous = item.previous
        kept = previous.passages if previous is not None and previous.generation == run.target else 0
        # the previous content's passages still answer searches
        entry = _entry(run, item, "failed", kept, datetime.now(UTC), error=error)
        if run.listing is not None and previous is None:
            await run.listing.touch()
        await self.store.put_entries(run.name, [entry])
        run.holds(item.document.id, kept, item.trusted, registered=True, new=previous is None)
        if previous is not None and previous.stamped and previous.generation == run.target:
            await self.store.unstamp(run.name, run.target, [item.document.id])
