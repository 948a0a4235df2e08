"""Hybrid search: BM25 beside the dense vectors in one generation, fused; its mode names the generation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

import pytest

from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.collections import SearchMode
from chamvi.knowledge.embedders import EmbeddingRegistry, default_embedding_registry
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.knowledge.sources import Source
from chamvi.knowledge.sparse import SPARSE_ENCODER
from tests.knowledge_helpers import CountingEmbedder, new_store

LOCAL = "local/all-minilm-l6-v2"
SERVICES = ["billing", "exports", "search", "login", "uploads", "reports", "webhooks", "invoices"]
# incident notes that differ mostly in their error code: the shape where dense vectors blur identifiers
INCIDENTS = {
    f"incident-{i}": (
        f"Incident note {i}: the {SERVICES[i % len(SERVICES)]} service failed with error code "
        f"E{(i * 7919) % 90000 + 10000} during the nightly run; retry after the queue drains."
    )
    for i in range(240)
}


def _source(documents: Mapping[str, str]) -> Source:
    async def read() -> AsyncIterator[dict[str, str]]:
        for document_id, content in documents.items():
            yield {"id": document_id, "content": content}

    return define_source(documents=read)


async def _indexed(
    store: KnowledgeIndex,
    registry: EmbeddingRegistry,
    name: str,
    search: SearchMode | None,
    model: str = LOCAL,
    documents: Mapping[str, str] = INCIDENTS,
) -> None:
    collection = knowledge_collection(name, model=model, sources=[_source(documents)], search=search)
    await Indexer(store, registry, concurrency=1).run_pass(collection)


@pytest.fixture(scope="module")
async def incidents() -> AsyncIterator[tuple[KnowledgeSearch, KnowledgeIndex]]:
    store, registry = new_store(), default_embedding_registry()
    await _indexed(store, registry, "dense", "dense")
    await _indexed(store, registry, "hybrid", "hybrid")
    yield KnowledgeSearch(store, registry), store
    await store.vectors.close()


async def test_an_exact_identifier_is_found_by_hybrid_search_and_missed_by_dense(
    incidents: tuple[KnowledgeSearch, KnowledgeIndex],
) -> None:
    searcher, _ = incidents
    target = "incident-137"
    code = INCIDENTS[target].split("error code ")[1].split()[0]
    dense = await searcher.search(["dense"], code, top_k=5)
    hybrid = await searcher.search(["hybrid"], code, top_k=5)
    assert target not in [m.document for m in dense.matches]
    assert hybrid.matches[0].document == target


async def test_a_paraphrase_still_ranks_by_meaning_in_a_hybrid_collection(
    incidents: tuple[KnowledgeSearch, KnowledgeIndex],
) -> None:
    searcher, _ = incidents
    query = "the sign-in service broke overnight"
    dense = await searcher.search(["dense"], query, top_k=5)
    hybrid = await searcher.search(["hybrid"], query, top_k=5)
    assert any("login" in m.text for m in dense.matches)
    assert any("login" in m.text for m in hybrid.matches)


async def test_a_search_over_a_dense_and_a_hybrid_collection_merges_them_by_rank(
    incidents: tuple[KnowledgeSearch, KnowledgeIndex],
) -> None:
    searcher, _ = incidents
    result = await searcher.search(["dense", "hybrid"], "E10000 billing", top_k=4)
    collections = [m.collection for m in result.matches]
    # each collection's first two, then each one's second two (by cosine within a rank)
    assert sorted(collections[:2]) == sorted(collections[2:]) == ["dense", "hybrid"]
    assert result.matches[1 if collections[0] == "dense" else 0].document == "incident-0"  # E10000


async def test_a_collection_keeps_its_generation_until_its_search_mode_changes() -> None:
    store, embedder = new_store(), CountingEmbedder()
    registry = EmbeddingRegistry()
    registry.register(embedder.ref, embedder)
    documents = {"a": "The flag --max-retries sets the retry count.", "b": "Exports run nightly."}

    async def indexed(search: SearchMode | None) -> tuple[int | None, int | None]:
        await _indexed(store, registry, "notes", search, embedder.ref, documents)
        meta = await store.meta("notes")
        assert meta is not None and meta.status == "ready" and meta.building is None
        return meta.generation, meta.sparse

    assert await indexed("dense") == (1, None)
    calls = embedder.calls
    assert await indexed(None) == (1, None)  # an indexed collection that says nothing keeps its mode
    assert embedder.calls == calls
    assert await indexed("hybrid") == (2, SPARSE_ENCODER)  # a new generation, like another model
    assert not await store.generation_exists("notes", 1)
    assert await indexed(None) == (2, SPARSE_ENCODER)
    assert await indexed("dense") == (3, None)
    await _indexed(store, registry, "fresh", None, embedder.ref, documents)
    fresh = await store.meta("fresh")
    assert fresh is not None and fresh.sparse == SPARSE_ENCODER  # a new collection gets the default
    await store.vectors.close()
