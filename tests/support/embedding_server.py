"""A scripted OpenAI-compatible embeddings server on loopback, for testing ``openai/...`` embedders over HTTP.

``POST /v1/embeddings`` answers from a queue of prepared answers, in order, whatever the request; an
answer may also be a function of the request (``hashed()`` embeds the request's inputs). When the
queue is empty the server answers its ``fallback`` (by default a 400, which a knowledge pass treats
as the document's fault, so a test never waits on retries). Every request is recorded.

    with EmbeddingServer() as server:
        server.add(vectors([1, 0], [0, 1]), rate_limited("2"), error(500, "boom"))
        provider = OpenAIEmbeddingProvider(api_key="test", base_url=server.url + "/v1")

Answers and the error helpers are shared with the chat completions server (``openai_server``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chamvi.knowledge.embedders import HashEmbedder
from tests.support.openai_server import rate_limited
from tests.support.scripted_server import Answer, Delayed, Recorded, ScriptedServer, error

EMBEDDINGS_PATH = "/v1/embeddings"

__all__ = [
    "EMBEDDINGS_PATH",
    "Answer",
    "Delayed",
    "EmbeddingRequest",
    "EmbeddingServer",
    "error",
    "hashed",
    "rate_limited",
    "unused_port",
    "vectors",
]


@dataclass(frozen=True)
class EmbeddingRequest(Recorded):
    """One embeddings request as the server saw it."""

    @property
    def inputs(self) -> list[str]:
        raw = self.body.get("input", [])
        return [raw] if isinstance(raw, str) else list(raw)


Responder = Callable[[EmbeddingRequest], Answer]


def _response(embeddings: Sequence[Sequence[float]], *, reverse: bool = False) -> dict[str, Any]:
    data = [
        {"object": "embedding", "index": index, "embedding": [float(x) for x in vector]}
        for index, vector in enumerate(embeddings)
    ]
    if reverse:
        data.reverse()
    return {
        "object": "list",
        "data": data,
        "model": "test-embedding-model",
        "usage": {"prompt_tokens": 3 * len(data), "total_tokens": 3 * len(data)},
    }


def vectors(*embeddings: Sequence[float], reverse: bool = False) -> Answer:
    """A 200 with these vectors (sent as given, not normalised); ``reverse`` lists them last index first."""
    return Answer(200, _response(embeddings, reverse=reverse))


def hashed(dimensions: int = 8) -> Responder:
    """Answers every request with the ``test/hash-<dimensions>`` vectors of its inputs."""
    embedder = HashEmbedder(dimensions)

    def respond(request: EmbeddingRequest) -> Answer:
        return Answer(200, _response([embedder.vector(text) for text in request.inputs]))

    return respond


def unused_port() -> int:
    """A loopback port nothing listens on (bound, then released), for connection-refused tests."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class EmbeddingServer(ScriptedServer[EmbeddingRequest]):
    """``POST /v1/embeddings``, answered from the script (an answer may be a function of the request).

    Args:
        fallback: what answers once the script is exhausted; by default a 400 saying so.
    """

    def __init__(self, fallback: Responder | None = None) -> None:
        super().__init__(EMBEDDINGS_PATH, EmbeddingRequest, fallback)
