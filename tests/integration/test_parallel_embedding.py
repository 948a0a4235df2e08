"""A pass keeps several embedding calls in flight, against a real loopback OpenAI-compatible server.

The server answers in its own threads (``ThreadingHTTPServer``), so calls overlap as they would at a
hosted API; it counts how many are being answered at once, which is what these tests check (never
a time).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from chamvi._lifecycle import memory_index
from chamvi.errors import ProviderUnavailableError
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.collections import KnowledgeCollection
from chamvi.knowledge.embedders import EmbeddingRegistry, OpenAIEmbeddingProvider
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import BATCH_SIZE, Indexer
from tests.support.embedding_server import EmbeddingRequest, EmbeddingServer, error, hashed, rate_limited
from tests.support.scripted_server import Answer


class Overlap:
    """Answers like ``hashed`` after ``seconds``, counting the requests it answers at once."""

    def __init__(self, seconds: float = 0.15, refuse: str | None = None) -> None:
        self.seconds = seconds
        self.refuse = refuse
        self.answer = hashed(16)
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, request: EmbeddingRequest) -> Answer:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.seconds)
            if self.refuse is not None and any(self.refuse in text for text in request.inputs):
                return error(400, "This model's maximum context length is 8192 tokens")
            return self.answer(request)
        finally:
            with self._lock:
                self.now -= 1


@pytest.fixture
def overlap() -> Overlap:
    return Overlap()


@pytest.fixture
def server(overlap: Overlap) -> Iterator[EmbeddingServer]:
    with EmbeddingServer(fallback=overlap) as started:
        yield started


def _registry(server: EmbeddingServer) -> EmbeddingRegistry:
    registry = EmbeddingRegistry()
    provider = OpenAIEmbeddingProvider(api_key="test", base_url=server.url + "/v1")
    registry.register("openai/m", provider.embedder("m"))
    return registry


def _collection(
    count: int, concurrency: int | None = None, text: Callable[[int], str] | None = None
) -> KnowledgeCollection:
    async def documents() -> AsyncIterator[dict[str, str]]:
        for i in range(count):
            yield {"id": f"doc-{i}", "content": text(i) if text else f"passage about topic {i}"}

    return knowledge_collection(
        "many",
        model="openai/m",
        sources=[define_source(documents=documents)],
        embedding_concurrency=concurrency,
    )


@pytest.fixture
async def index() -> AsyncIterator[KnowledgeIndex]:
    store = memory_index()
    yield store
    await store.vectors.close()


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_a_pass_keeps_up_to_its_concurrency_of_calls_of_64_in_flight(
    server: EmbeddingServer, overlap: Overlap, index: KnowledgeIndex, concurrency: int
) -> None:
    documents = BATCH_SIZE * 7 + 5  # one passage each: 8 calls
    meta = await Indexer(index, _registry(server)).run_pass(_collection(documents, concurrency))

    assert meta.status == "ready" and meta.documents == documents and meta.passages == documents
    sizes = [len(r.inputs) for r in server.requests]
    # calls in flight together reach the server in any order
    assert sorted(sizes, reverse=True) == [BATCH_SIZE] * 7 + [5]
    assert overlap.most == concurrency
    # every document was written with its own vector, in the order read
    hits = await index.search("many", 1, hashed(16)(server.requests[-1]).body["data"][0]["embedding"], 1)
    assert hits[0].document == server.requests[-1].inputs[0].replace("passage about topic ", "doc-")


async def test_the_default_is_four_calls_in_flight(
    server: EmbeddingServer, overlap: Overlap, index: KnowledgeIndex
) -> None:
    await Indexer(index, _registry(server)).run_pass(_collection(BATCH_SIZE * 9))
    assert overlap.most == 4 and len(server.requests) == 9


async def test_a_rate_limited_provider_slows_the_pass_and_never_fails_it_while_retries_remain(
    server: EmbeddingServer, overlap: Overlap, index: KnowledgeIndex
) -> None:
    server.add(rate_limited("0.3"), rate_limited("0.2"), rate_limited("0"))
    documents = BATCH_SIZE * 6
    meta = await Indexer(index, _registry(server)).run_pass(_collection(documents, 4))

    assert meta.status == "ready" and meta.documents == documents
    assert meta.last_stats is not None and meta.last_stats.embedding_calls == 6
    assert len(server.requests) == 6 + 3 and server.pending == 0


async def test_a_provider_that_keeps_rate_limiting_fails_the_pass_once_the_retries_are_spent(
    server: EmbeddingServer, index: KnowledgeIndex
) -> None:
    server.add(*[rate_limited("0")] * 3)
    indexer = Indexer(index, _registry(server), rate_limit_retries=2, concurrency=1)
    with pytest.raises(ProviderUnavailableError, match="429"):
        await indexer.run_pass(_collection(3))
    assert len(server.requests) == 3


async def test_a_document_refused_while_other_calls_are_in_flight_fails_alone(
    index: KnowledgeIndex,
) -> None:
    overlap = Overlap(seconds=0.05, refuse="poison")
    with EmbeddingServer(fallback=overlap) as server:
        documents = BATCH_SIZE * 5
        collection = _collection(documents, 4, lambda i: "poison pill" if i == 70 else f"passage {i}")
        meta = await Indexer(index, _registry(server)).run_pass(collection)

    assert meta.status == "ready" and meta.documents == documents
    assert meta.last_stats is not None and meta.last_stats.failed == 1
    assert meta.last_stats.embedded == documents - 1
    failed = await index.entry("many", "doc-70")
    assert failed is not None and failed.status == "failed" and "context length" in (failed.error or "")
