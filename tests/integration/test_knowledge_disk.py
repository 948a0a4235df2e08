"""Passes over Qdrant's local mode on disk, the embedded default: what a pass writes, and its calls.

In local mode on disk every point written is a stored SQLite row, so these tests read the stored
files themselves to show what a pass wrote.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient

from chamvi.errors import ProviderHTTPError
from chamvi.knowledge import (
    Source,
    SourceContext,
    _listing,
    chunk,
    define_source,
    folder,
    knowledge_collection,
)
from chamvi.knowledge.documents import Document
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import BATCH_SIZE, Indexer
from chamvi.knowledge.sources import RACY_SECONDS
from chamvi.models.knowledge import CollectionMeta, DocumentListHeader
from tests.knowledge_helpers import CountingEmbedder

NAME = "handbook"


class RecordingEmbedder(CountingEmbedder):
    """Counts like ``CountingEmbedder`` and keeps the size of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = await super().embed(texts)
        self.sizes.append(len(texts))
        return vectors


def write_pages(root: Path, count: int, paragraphs: int = 1) -> None:
    for i in range(count):
        body = "\n\n".join(f"Page {i} part {p}. " + "Refunds and shipping. " * 70 for p in range(paragraphs))
        (root / f"page{i:03d}.md").write_text(f"# Page {i}\n\n{body}\n")


def passages_of(root: Path) -> int:
    return sum(len(chunk(p.read_text())) for p in root.glob("*.md"))


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    return root


@pytest.fixture
async def qdrant(tmp_path: Path) -> AsyncIterator[AsyncQdrantClient]:
    client = AsyncQdrantClient(path=str(tmp_path / "qdrant"))
    yield client
    await client.close()


def indexer(client: AsyncQdrantClient, embedder: CountingEmbedder) -> Indexer:
    registry = EmbeddingRegistry()
    registry.register(embedder.ref, embedder)
    return Indexer(KnowledgeIndex(client), registry)


async def run(indexer: Indexer, docs: Path, embedder: CountingEmbedder) -> CollectionMeta:
    return await indexer.run_pass(knowledge_collection(NAME, model=embedder.ref, sources=[folder(docs)]))


async def indexed(
    qdrant: AsyncQdrantClient, docs: Path, count: int, paragraphs: int = 1
) -> tuple[Indexer, CountingEmbedder, CollectionMeta]:
    """A first pass over ``count`` new pages: the indexer, its embedder and the meta after it."""
    write_pages(docs, count, paragraphs)
    embedder = CountingEmbedder()
    passes = indexer(qdrant, embedder)
    return passes, embedder, await run(passes, docs, embedder)


def stored_rows(tmp_path: Path) -> dict[str, bytes]:
    """The stored files of every Qdrant collection but the collections' meta (a pass saves it)."""
    return {
        str(p.relative_to(tmp_path)): p.read_bytes()
        for p in (tmp_path / "qdrant" / "collection").glob("*/storage.sqlite")
        if p.parent.name != "chamvi__meta"
    }


async def test_a_no_op_pass_on_disk_writes_no_stored_row(
    qdrant: AsyncQdrantClient, docs: Path, tmp_path: Path
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 40)
    before = stored_rows(tmp_path)
    calls = embedder.calls
    meta = await run(passes, docs, embedder)
    assert meta.last_stats is not None and meta.last_stats.unchanged == 40
    assert embedder.calls == calls and meta.documents == 40
    assert before and stored_rows(tmp_path) == before


async def test_a_first_index_keeps_each_entry_on_its_passages_and_writes_no_registry_point(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    passes, _, meta = await indexed(qdrant, docs, 10)
    names = [c.name for c in (await qdrant.get_collections()).collections]
    entry = await passes.store.entry(NAME, "page003.md")
    assert not any("__docs__" in n for n in names), names
    assert meta.documents == 10 and meta.passages == passages_of(docs)
    assert entry is not None and entry.status == "ready" and entry.generation == meta.generation
    assert entry.title == "Page 3" and entry.passages == 1


async def test_embedding_calls_carry_64_passages_each_except_the_last(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    write_pages(docs, 70, paragraphs=3)  # documents of 3 passages: calls of 64 end inside documents
    total = passages_of(docs)
    embedder = RecordingEmbedder()
    meta = await run(indexer(qdrant, embedder), docs, embedder)
    assert total % BATCH_SIZE and total > 3 * BATCH_SIZE
    assert embedder.sizes[:-1] == [BATCH_SIZE] * (len(embedder.sizes) - 1)
    assert len(embedder.sizes) == math.ceil(total / BATCH_SIZE) and sum(embedder.sizes) == total
    assert meta.last_stats is not None and meta.last_stats.embedding_calls == len(embedder.sizes)
    assert meta.passages == total


async def test_an_edit_a_deletion_and_an_addition_on_disk_write_only_those_documents(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 30, paragraphs=2)
    (docs / "page004.md").write_text("# Page 4\n\nNow a single short passage.\n")
    (docs / "page005.md").unlink()
    (docs / "page100.md").write_text("# Page 100\n\nA new page.\n")
    texts = embedder.texts
    meta = await run(passes, docs, embedder)
    stats = meta.last_stats
    assert stats is not None and (stats.embedded, stats.deleted, stats.unchanged) == (2, 1, 28)
    assert embedder.texts - texts == 2
    assert meta.documents == 30 and meta.passages == passages_of(docs)
    assert await passes.store.entry(NAME, "page005.md") is None
    shrunk = await passes.store.entry(NAME, "page004.md")
    assert shrunk is not None and shrunk.passages == 1


async def test_a_registry_written_as_points_by_earlier_versions_keeps_working(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    passes, embedder, meta = await indexed(qdrant, docs, 12)
    store = passes.store
    assert meta.generation is not None
    ids = [f"page{i:03d}.md" for i in range(12)]
    entries = [e for e in [await store.entry(NAME, i) for i in ids] if e is not None]
    # the layout earlier versions wrote: every entry a registry point, nothing on the passages
    await store.put_entries(NAME, entries)
    await store.unstamp(NAME, meta.generation, ids)
    assert await store.count_entries(NAME, None) == 12
    (docs / "page001.md").write_text("# Page 1\n\nEdited.\n")
    (docs / "page002.md").unlink()
    texts = embedder.texts
    meta = await run(passes, docs, embedder)
    stats = meta.last_stats
    assert stats is not None and (stats.embedded, stats.deleted, stats.unchanged) == (1, 1, 10)
    assert embedder.texts - texts == 1
    assert await store.count_entries(NAME, None) == 10  # the edited entry moved onto its passage
    assert meta.documents == 11 and meta.passages == passages_of(docs)
    again = await run(passes, docs, embedder)
    assert again.last_stats is not None and again.last_stats.unchanged == 11 and embedder.texts - texts == 1


async def test_a_document_refused_after_it_was_indexed_keeps_one_entry_and_its_old_passages(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    passes, embedder, first = await indexed(qdrant, docs, 3)
    (docs / "page001.md").write_text("# Page 1\n\nToo long for the provider.\n")
    embedder.failures.append(ProviderHTTPError(400, "input too long"))
    meta = await run(passes, docs, embedder)
    failed = await passes.store.entry(NAME, "page001.md")
    assert meta.last_stats is not None and meta.last_stats.failed == 1
    assert failed is not None and failed.status == "failed" and failed.passages == 1
    assert meta.documents == 3 and meta.passages == first.passages
    again = await run(passes, docs, embedder)
    assert again.last_stats is not None and again.last_stats.unchanged == 3 and again.documents == 3


async def test_a_model_change_with_a_deleted_file_leaves_only_the_files_read_in_the_new_generation(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    passes, _, first = await indexed(qdrant, docs, 8, paragraphs=2)
    (docs / "page006.md").unlink()
    other = CountingEmbedder(ref="test/other")
    passes.embedders.register(other.ref, other)
    meta = await passes.run_pass(knowledge_collection(NAME, model=other.ref, sources=[folder(docs)]))
    assert first.generation is not None and meta.generation == first.generation + 1
    assert meta.documents == 7 and meta.passages == passages_of(docs)
    assert await passes.store.entry(NAME, "page006.md") is None


async def test_an_empty_file_is_kept_in_the_registry_and_deleted_from_it_once_removed(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    (docs / "empty.md").write_text("")
    passes, embedder, meta = await indexed(qdrant, docs, 4)
    empty = await passes.store.entry(NAME, "empty.md")
    assert empty is not None and empty.passages == 0 and meta.documents == 5
    assert await passes.store.count_entries(NAME, None) == 1
    (docs / "empty.md").unlink()
    again = await run(passes, docs, embedder)
    assert again.last_stats is not None and again.last_stats.deleted == 1 and again.documents == 4
    assert await passes.store.count_entries(NAME, None) == 0


async def test_a_no_op_pass_reads_no_file_whose_size_and_times_are_unchanged(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    write_pages(docs, 20)
    await asyncio.sleep(RACY_SECONDS + 0.2)  # older than the window in which times cannot tell
    embedder = CountingEmbedder()
    passes = indexer(qdrant, embedder)
    first = await run(passes, docs, embedder)
    noop = await run(passes, docs, embedder)
    edited = docs / "page003.md"
    edited.write_text(edited.read_text().replace("Refunds", "Returns", 1))  # the same size
    calls = embedder.calls
    after_edit = await run(passes, docs, embedder)
    assert first.last_stats is not None and first.last_stats.not_read == 0
    assert noop.last_stats is not None and (noop.last_stats.unchanged, noop.last_stats.not_read) == (20, 20)
    stats = after_edit.last_stats
    assert stats is not None and (stats.embedded, stats.unchanged, stats.not_read) == (1, 19, 19)
    assert embedder.calls == calls + 1 and after_edit.documents == 20
    entry = await passes.store.entry(NAME, "page003.md")
    assert entry is not None and entry.version is None  # just written: read again next time


async def test_files_read_while_their_times_could_not_tell_get_a_version_once_they_can(
    qdrant: AsyncQdrantClient, docs: Path, tmp_path: Path
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 12)  # written just now: no version kept
    again = await run(passes, docs, embedder)
    before = stored_rows(tmp_path)
    await asyncio.sleep(RACY_SECONDS + 0.2)
    versioned = await run(passes, docs, embedder)
    written = stored_rows(tmp_path) != before
    skipped = await run(passes, docs, embedder)
    assert again.last_stats is not None and again.last_stats.not_read == 0
    assert versioned.last_stats is not None
    assert (versioned.last_stats.unchanged, versioned.last_stats.not_read, versioned.last_stats.embedded) == (
        12,
        0,
        0,
    )
    assert written  # each entry took its version, in place
    assert skipped.last_stats is not None and skipped.last_stats.not_read == 12
    assert embedder.texts == 12 and skipped.documents == 12 and skipped.passages == passages_of(docs)


async def test_a_file_yielded_by_an_earlier_source_is_read_and_reported_not_passed_over(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    write_pages(docs, 3)
    await asyncio.sleep(RACY_SECONDS + 0.2)
    embedder = CountingEmbedder()
    passes = indexer(qdrant, embedder)
    collection = knowledge_collection(NAME, model=embedder.ref, sources=[folder(docs), folder(docs)])
    await passes.run_pass(collection)
    meta = await passes.run_pass(collection)
    stats = meta.last_stats
    assert stats is not None and (stats.read, stats.unchanged, stats.not_read, stats.skipped) == (3, 3, 3, 3)
    assert meta.documents == 3


class Killed(Exception):
    """Stands for the worker dying at that point of a pass."""


def forbid_scans(monkeypatch: pytest.MonkeyPatch, store: KnowledgeIndex) -> None:
    """Makes a scan of the registry or of a generation fail the test."""

    def scan(*_: object) -> None:
        raise AssertionError("the pass scanned instead of reading its document list")

    monkeypatch.setattr(store, "passage_ids", scan)
    monkeypatch.setattr(store, "registry_ids", scan)


async def listed(store: KnowledgeIndex) -> tuple[DocumentListHeader, list[str]]:
    """The list's header and the ids its pages name, checking that no other page is stored."""
    header = await store.list_header(NAME)
    assert header is not None
    ids = [d for page in header.pages for d in await store.list_page(NAME, page) or []]
    assert sorted(await store.list_pages(NAME)) == sorted(header.pages)
    assert header.documents == len(ids)
    return header, ids


async def dies_in(
    passes: Indexer,
    docs: Path,
    embedder: CountingEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    fake: Any,
) -> None:
    """Runs a pass with the store's ``method`` replaced by ``fake`` (which raises ``Killed``), then
    puts the method back."""
    monkeypatch.setattr(passes.store, method, fake)
    with pytest.raises(Killed):
        await run(passes, docs, embedder)
    monkeypatch.undo()


def files(docs: Path) -> list[str]:
    return sorted(p.name for p in docs.glob("*.md"))


async def holds_exactly_the_files(passes: Indexer, docs: Path, meta: CollectionMeta) -> None:
    """The collection, its generation and its document list name the folder's files, nothing else."""
    assert meta.generation is not None
    _, ids = await listed(passes.store)
    assert sorted(ids) == files(docs)
    assert meta.documents == len(files(docs)) and meta.passages == passages_of(docs)
    assert await passes.store.count_passages(NAME, meta.generation) == passages_of(docs)
    assert await passes.store.count_entries(NAME, meta.generation) == len(files(docs))


async def test_a_resync_finds_deleted_files_through_the_document_list_without_a_scan(
    qdrant: AsyncQdrantClient, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_listing, "PAGE_SIZE", 4)  # several pages, some kept, some replaced
    passes, embedder, first = await indexed(qdrant, docs, 30, paragraphs=2)
    await holds_exactly_the_files(passes, docs, first)
    forbid_scans(monkeypatch, passes.store)
    (docs / "page004.md").write_text("# Page 4\n\nNow a single short passage.\n")
    for gone in ("page005.md", "page017.md", "page029.md"):
        (docs / gone).unlink()
    (docs / "page100.md").write_text("# Page 100\n\nA new page.\n")
    meta = await run(passes, docs, embedder)
    stats = meta.last_stats
    header, _ = await listed(passes.store)
    assert stats is not None and (stats.embedded, stats.deleted, stats.unchanged) == (2, 3, 26)
    assert header.clean and header.generation == meta.generation
    await holds_exactly_the_files(passes, docs, meta)
    for gone in ("page005.md", "page017.md", "page029.md"):
        assert await passes.store.entry(NAME, gone) is None


async def test_a_pass_killed_after_writing_a_new_file_leaves_the_list_for_a_scan_that_deletes_it_later(
    qdrant: AsyncQdrantClient, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 10)
    store = passes.store
    write = store.write_passages

    async def write_then_die(*args: object, **kwargs: object) -> None:
        await write(*args, **kwargs)  # type: ignore[arg-type]
        raise Killed

    (docs / "page050.md").write_text("# Page 50\n\nWritten, then the worker died.\n")
    await dies_in(passes, docs, embedder, monkeypatch, "write_passages", write_then_die)
    header = await store.list_header(NAME)
    assert header is not None and not header.clean  # the list may not name page050.md
    (docs / "page050.md").unlink()
    meta = await run(passes, docs, embedder)
    assert meta.last_stats is not None and meta.last_stats.deleted == 1
    assert await store.entry(NAME, "page050.md") is None
    header, _ = await listed(store)
    assert header.clean
    await holds_exactly_the_files(passes, docs, meta)


async def test_a_pass_killed_while_deleting_leaves_names_that_the_next_pass_passes_over(
    qdrant: AsyncQdrantClient, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 10, paragraphs=2)
    store = passes.store
    delete = store.delete_points

    async def delete_one_point_then_die(name: str, generation: int, ids: list[str]) -> None:
        await delete(name, generation, ids[:1])  # the first passage of two
        raise Killed

    for gone in ("page002.md", "page003.md", "page004.md"):
        (docs / gone).unlink()
    await dies_in(passes, docs, embedder, monkeypatch, "delete_points", delete_one_point_then_die)
    forbid_scans(monkeypatch, store)
    meta = await run(passes, docs, embedder)
    assert meta.last_stats is not None and meta.last_stats.deleted == 3  # half-deleted ones too
    await holds_exactly_the_files(passes, docs, meta)


async def test_a_file_back_after_a_pass_died_deleting_it_is_listed_once(
    qdrant: AsyncQdrantClient, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 10)
    store = passes.store
    delete = store.delete_passage_points

    async def delete_one_document_then_die(name: str, generation: int, passages: dict[str, range]) -> None:
        first = next(iter(passages))
        await delete(name, generation, {first: passages[first]})
        raise Killed

    for gone in ("page002.md", "page003.md"):
        (docs / gone).unlink()
    await dies_in(passes, docs, embedder, monkeypatch, "delete_passage_points", delete_one_document_then_die)
    forbid_scans(monkeypatch, store)
    write_pages(docs, 4)  # both back: one was deleted (the list still names it), one was not
    meta = await run(passes, docs, embedder)
    stats = meta.last_stats
    assert stats is not None and (stats.embedded, stats.unchanged, stats.deleted) == (1, 9, 0)
    await holds_exactly_the_files(passes, docs, meta)


async def test_an_incomplete_read_lists_the_files_it_added_so_a_later_pass_deletes_them(
    qdrant: AsyncQdrantClient, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 6)
    failing = True

    async def remote(ctx: SourceContext) -> AsyncIterator[Document]:
        if failing:
            ctx.incomplete("the server answered 503")
        return
        yield

    sources: list[Source] = [folder(docs), define_source(documents=remote)]
    collection = knowledge_collection(NAME, model=embedder.ref, sources=sources)
    (docs / "page040.md").write_text("# Page 40\n\nAdded while the other source failed.\n")
    (docs / "page001.md").unlink()
    incomplete = await passes.run_pass(collection)
    assert incomplete.last_stats is not None and incomplete.last_stats.deleted == 0
    header, ids = await listed(passes.store)
    assert header.clean and "page040.md" in ids and "page001.md" in ids
    forbid_scans(monkeypatch, passes.store)
    failing = False
    (docs / "page040.md").unlink()
    meta = await passes.run_pass(collection)
    assert meta.last_stats is not None and meta.last_stats.deleted == 2
    await holds_exactly_the_files(passes, docs, meta)


async def test_a_collection_indexed_before_the_document_list_gets_one_from_its_next_pass(
    qdrant: AsyncQdrantClient, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes, embedder, _ = await indexed(qdrant, docs, 8)
    await qdrant.delete_collection("chamvi__list__" + NAME)  # what earlier versions left
    (docs / "page002.md").unlink()
    scanned = await run(passes, docs, embedder)
    assert scanned.last_stats is not None and scanned.last_stats.deleted == 1
    await holds_exactly_the_files(passes, docs, scanned)
    forbid_scans(monkeypatch, passes.store)
    (docs / "page003.md").unlink()
    meta = await run(passes, docs, embedder)
    assert meta.last_stats is not None and meta.last_stats.deleted == 1
    await holds_exactly_the_files(passes, docs, meta)


async def test_deleting_a_collection_drops_its_document_list_with_everything_else(
    qdrant: AsyncQdrantClient, docs: Path
) -> None:
    passes, _, _ = await indexed(qdrant, docs, 3)
    (docs / "empty.md").write_text("")  # a registry point too
    await run(passes, docs, CountingEmbedder())
    before = [c.name for c in (await qdrant.get_collections()).collections]
    await passes.store.delete_collection(NAME)
    after = [c.name for c in (await qdrant.get_collections()).collections]
    assert {"chamvi__list__handbook", "chamvi__docs__handbook"} <= set(before)
    assert [n for n in after if NAME in n] == []


async def test_a_list_page_gone_missing_makes_the_pass_scan_and_the_next_one_list_afresh(
    qdrant: AsyncQdrantClient, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_listing, "PAGE_SIZE", 3)
    passes, embedder, _ = await indexed(qdrant, docs, 9, paragraphs=2)
    header, _ = await listed(passes.store)
    await passes.store.delete_list_pages(NAME, header.pages[1:2])
    (docs / "page000.md").unlink()
    (docs / "page004.md").unlink()
    scanned = await run(passes, docs, embedder)
    unsure = await passes.store.list_header(NAME)
    assert scanned.last_stats is not None and scanned.last_stats.deleted == 2
    # the scan, which this pass had kept no passage ids for, kept every passage of the files left
    assert scanned.generation is not None and passages_of(docs) > len(files(docs))
    assert await passes.store.count_passages(NAME, scanned.generation) == passages_of(docs)
    assert unsure is not None and not unsure.clean
    relisted = await run(passes, docs, embedder)
    await holds_exactly_the_files(passes, docs, relisted)
    forbid_scans(monkeypatch, passes.store)
    (docs / "page008.md").unlink()
    meta = await run(passes, docs, embedder)
    assert meta.last_stats is not None and meta.last_stats.deleted == 1
    await holds_exactly_the_files(passes, docs, meta)
