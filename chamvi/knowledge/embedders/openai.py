"""``openai/<model id>``: the OpenAI embeddings API and every server that speaks it.

Same conventions as the chat provider (``chamvi.providers.openai``): ``OPENAI_API_KEY`` authenticates,
``OPENAI_BASE_URL`` reaches Ollama, vLLM and other compatible servers, the SDK's own retries are off
(Temporal and the collection's backoff retry). Errors follow the chat provider's one rule
(``chamvi.errors.provider_http_error``); a ``ProviderHTTPError`` whose ``input_refused`` (400, 413,
422) fails only the documents the provider refuses.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import openai

from chamvi.errors import ProviderHTTPError
from chamvi.knowledge.embedders._base import normalise

# Shared with the chat provider so both read a provider's errors and retry-after the same way.
from chamvi.providers.openai import MISSING_KEY, LazyOpenAIClient, translated_errors

KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}

MAX_INPUTS_PER_REQUEST = 2048
"""The OpenAI API's limit on inputs in one embeddings request; longer lists are sent in parts."""


class OpenAIEmbedder:
    """One ``openai/<model id>`` embedding model.

    Args:
        model_id: the id the server knows the model by, e.g. ``text-embedding-3-small`` or
            ``nomic-embed-text`` (Ollama).
        client: the client, or a function building it on first use (so resolving a ref needs no key).
    """

    def __init__(self, model_id: str, client: openai.AsyncOpenAI | Callable[[], openai.AsyncOpenAI]) -> None:
        self.model_id = model_id
        self._client = client
        self._dimensions = KNOWN_DIMENSIONS.get(model_id)

    @property
    def ref(self) -> str:
        """The name collections declare this model by; it is stored in their meta."""
        return f"openai/{self.model_id}"

    @property
    def dimensions(self) -> int | None:
        """Known for OpenAI's own models; for others, learned from the first answer."""
        return self._dimensions

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The OpenAI client, built on first use so that resolving a ref needs no API key."""
        if not isinstance(self._client, openai.AsyncOpenAI):
            self._client = self._client()
        return self._client

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order.

        Raises:
            ProviderHTTPError: the server refused the request (401 without a key).
            ProviderUnavailableError: the server could not be reached, did not answer in time, or
                answered a status worth retrying.
        """
        vectors: list[list[float]] = []
        for start in range(0, len(texts), MAX_INPUTS_PER_REQUEST):
            vectors.extend(await self._embed_part(texts[start : start + MAX_INPUTS_PER_REQUEST]))
        return vectors

    async def _embed_part(self, texts: list[str]) -> list[list[float]]:
        client = self.client
        where = f"{self.ref!r} at {client.base_url}"
        with translated_errors(
            where,
            client.timeout,
            service="embedding provider",
            retried_by="the call is retried",
        ):
            # float, not the SDK's default base64: not every compatible server speaks base64. The raw
            # answer, parsed here: the SDK builds its response model one float at a time (0.15 s of CPU
            # for 64 vectors of 1536 dimensions, 7x json.loads), CPU a pass with calls in flight lacks.
            raw = await client.embeddings.with_raw_response.create(
                model=self.model_id, input=texts, encoding_format="float"
            )
        data = _embeddings(raw.content, where)
        if [index for index, _ in data] != list(range(len(texts))):
            # A plain exception: retried like any transient provider fault.
            raise RuntimeError(
                f"{where} answered {len(data)} embeddings with indexes "
                f"{[index for index, _ in data][:10]} for {len(texts)} inputs"
            )
        vectors = [normalise(embedding) for _, embedding in data]
        if vectors and self._dimensions is None:
            self._dimensions = len(vectors[0])
        return vectors


def _embeddings(content: bytes, where: str) -> list[tuple[int, list[float]]]:
    """The ``(index, embedding)`` pairs of an embeddings answer, sorted by index.

    Raises:
        RuntimeError: the answer is not an embeddings list (retried like a transient fault).
    """
    try:
        data = json.loads(content)["data"] or []
        pairs = [(int(item["index"]), item["embedding"]) for item in data]
    except (ValueError, KeyError, TypeError) as error:
        raise RuntimeError(f"{where} answered something other than an embeddings list: {error}") from None
    if not all(isinstance(embedding, list) for _, embedding in pairs):
        raise RuntimeError(f"{where} answered embeddings that are not lists of floats")
    return sorted(pairs, key=lambda pair: pair[0])


class OpenAIEmbeddingProvider(LazyOpenAIClient):
    """Serves every ``openai/...`` embedding ref from one client (60 s per request, the seed's limit)."""

    default_timeout = 60.0

    def _missing_key(self) -> Exception:
        return ProviderHTTPError(
            401, f"embedding provider answered 401: {MISSING_KEY}, or use 'local/all-minilm-l6-v2' offline"
        )

    def embedder(self, model_id: str) -> OpenAIEmbedder:
        """The registry's factory for ``openai/<model_id>``; builds no client yet."""
        return OpenAIEmbedder(model_id, self.client)
