"""The ``openai/...`` embedder over real HTTP, against a loopback OpenAI-compatible server."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest
from qdrant_client import AsyncQdrantClient
from temporalio.common import RetryPolicy

from chamvi.errors import ProviderHTTPError, ProviderUnavailableError
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.embedders import (
    EmbeddingRegistry,
    HashEmbedder,
    OpenAIEmbeddingProvider,
    default_embedding_registry,
)
from chamvi.knowledge.embedders import openai as openai_embedders
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import Indexer
from tests.support.embedding_server import (
    Delayed,
    EmbeddingServer,
    error,
    hashed,
    rate_limited,
    unused_port,
    vectors,
)
from tests.support.scripted_server import Answer


@pytest.fixture
def server() -> Iterator[EmbeddingServer]:
    with EmbeddingServer() as started:
        yield started


def provider_for(server: EmbeddingServer, timeout: float = 60.0) -> OpenAIEmbeddingProvider:
    return OpenAIEmbeddingProvider(api_key="test", base_url=server.url + "/v1", timeout=timeout)


async def test_vectors_come_back_in_input_order_normalised_whatever_order_the_server_lists_them(
    server: EmbeddingServer,
) -> None:
    server.add(vectors([3, 4, 0], [0, 0, 2], [1, 1, 1], reverse=True))
    embedder = provider_for(server).embedder("nomic-embed-text")

    result = await embedder.embed(["first", "second", "third"])

    third = 1 / math.sqrt(3)
    assert result == [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0], pytest.approx([third, third, third])]
    (request,) = server.requests
    assert request.body["model"] == "nomic-embed-text"
    assert request.inputs == ["first", "second", "third"]
    assert request.body["encoding_format"] == "float"
    assert request.headers["authorization"] == "Bearer test"


async def test_dimensions_are_learned_from_the_first_answer_for_a_model_of_unknown_size(
    server: EmbeddingServer,
) -> None:
    server.add(vectors([1, 0, 0, 0]))
    embedder = provider_for(server).embedder("nomic-embed-text")
    assert embedder.dimensions is None

    await embedder.embed(["one"])

    assert embedder.dimensions == 4
    assert provider_for(server).embedder("text-embedding-3-small").dimensions == 1536


async def test_an_empty_list_makes_no_request(server: EmbeddingServer) -> None:
    assert await provider_for(server).embedder("m").embed([]) == []
    assert server.requests == []


async def test_long_lists_are_sent_in_parts_and_joined_in_order(
    server: EmbeddingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_embedders, "MAX_INPUTS_PER_REQUEST", 2)
    server.add(vectors([1, 0], [0, 1]), vectors([-1, 0], [0, -1]), vectors([1, 1]))

    result = await provider_for(server).embedder("m").embed(["a", "b", "c", "d", "e"])

    assert [request.inputs for request in server.requests] == [["a", "b"], ["c", "d"], ["e"]]
    assert result[:4] == [[1, 0], [0, 1], [-1, 0], [0, -1]]
    assert result[4] == pytest.approx([1 / math.sqrt(2)] * 2)


async def test_a_rate_limit_is_a_retryable_http_error_carrying_retry_after(server: EmbeddingServer) -> None:
    server.add(rate_limited("7"))

    with pytest.raises(ProviderUnavailableError) as raised:
        await provider_for(server).embedder("m").embed(["a"])

    assert raised.value.status == 429
    assert raised.value.retry_after == 7.0
    assert raised.value.retryable
    assert "Rate limit reached" in str(raised.value)


async def test_a_server_error_is_retryable_and_not_the_documents_fault(server: EmbeddingServer) -> None:
    server.add(error(500, "the embedding backend fell over"))

    with pytest.raises(ProviderUnavailableError) as raised:
        await provider_for(server).embedder("m").embed(["a"])

    assert raised.value.status == 500
    assert raised.value.retryable
    assert raised.value.retry_after is None


@pytest.mark.parametrize("status", [400, 413, 422])
async def test_a_refused_input_is_a_document_level_error_that_is_not_retried(
    server: EmbeddingServer, status: int
) -> None:
    server.add(error(status, "This model's maximum context length is 8192 tokens"))

    with pytest.raises(ProviderHTTPError) as raised:
        await provider_for(server).embedder("m").embed(["a very long passage"])

    assert raised.value.status == status
    assert raised.value.input_refused
    assert not raised.value.retryable
    assert "maximum context length" in str(raised.value)
    assert "'openai/m'" in str(raised.value)


async def test_connection_refused_is_a_retryable_connection_error_naming_the_server() -> None:
    base_url = f"http://127.0.0.1:{unused_port()}/v1"
    embedder = OpenAIEmbeddingProvider(api_key="test", base_url=base_url).embedder("m")

    with pytest.raises(ProviderUnavailableError) as raised:
        await embedder.embed(["a"])

    assert raised.value.retryable
    assert base_url in str(raised.value)
    assert "OPENAI_BASE_URL" in str(raised.value)


async def test_a_server_that_does_not_answer_in_time_is_a_connection_error(server: EmbeddingServer) -> None:
    server.add(Delayed(vectors([1, 0]), seconds=2.0))

    with pytest.raises(ProviderUnavailableError, match=r"did not answer within 0\.2 s"):
        await provider_for(server, timeout=0.2).embedder("m").embed(["a"])


async def test_an_answer_with_the_wrong_number_of_vectors_is_an_error(server: EmbeddingServer) -> None:
    server.add(vectors([1, 0]))

    with pytest.raises(RuntimeError, match=r"1 embeddings .* for 2 inputs"):
        await provider_for(server).embedder("m").embed(["a", "b"])


@pytest.mark.parametrize(
    "body",
    [{"object": "list"}, {"data": [{"index": 0}]}, {"data": [{"index": 0, "embedding": "AAAA"}]}],
)
async def test_an_answer_that_is_not_an_embeddings_list_is_a_transient_error(
    server: EmbeddingServer, body: dict[str, object]
) -> None:
    server.add(Answer(200, body))

    with pytest.raises(RuntimeError, match="answered"):
        await provider_for(server).embedder("m").embed(["a"])


async def test_the_default_registry_reaches_the_server_named_by_openai_base_url_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with EmbeddingServer(fallback=hashed(16)) as server:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        embedder = default_embedding_registry().resolve("openai/nomic-embed-text")

        result = await embedder.embed(["refund policy", "shipping times"])

        assert result == [
            pytest.approx(HashEmbedder(16).vector(t)) for t in ["refund policy", "shipping times"]
        ]
        assert server.requests[0].headers["authorization"] == "Bearer no-key"


async def test_the_apps_embedding_policy_retries_a_rate_limited_call_inside_the_pass(
    server: EmbeddingServer,
) -> None:
    """Without rate-limit retries a 429 fails the pass (its backoff retries it whole); a policy retries it."""
    registry = EmbeddingRegistry()
    registry.register("openai/m", provider_for(server).embedder("m"))

    async def one() -> AsyncIterator[dict[str, str]]:
        yield {"id": "a", "content": "hi"}

    collection = knowledge_collection("limited", model="openai/m", sources=[define_source(documents=one)])
    server.add(rate_limited("0"))
    with pytest.raises(ProviderUnavailableError, match="429"):
        store = KnowledgeIndex(AsyncQdrantClient(location=":memory:"))
        await Indexer(store, registry, rate_limit_retries=0).run_pass(collection)

    server.add(rate_limited("0"), rate_limited("0"), hashed())
    patient = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=10))
    index = KnowledgeIndex(AsyncQdrantClient(location=":memory:"))
    meta = await Indexer(index, registry, retry=patient, rate_limit_retries=0).run_pass(collection)

    assert meta.status == "ready" and meta.last_stats is not None and meta.last_stats.embedded == 1
    assert len(server.requests) == 4 and server.pending == 0
