"""The contract every embedding model keeps, and the errors a provider's failures become."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

DOCUMENT_LEVEL_STATUSES = frozenset({400, 413, 422})
"""Statuses by which a provider refuses the input itself (too long, malformed): that document fails."""


class Embedder(Protocol):
    """One embedding model, named by its ref (``openai/text-embedding-3-small``, ``local/all-minilm-l6-v2``).

    ``embed`` answers one vector per text, in the order of ``texts``, each of unit length so that
    cosine similarity is a dot product. ``dimensions`` is the vector size when known before the first
    call, else ``None`` until a call has answered.
    """

    @property
    def ref(self) -> str: ...

    @property
    def dimensions(self) -> int | None: ...

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


class EmbeddingHTTPError(Exception):
    """An embedding provider answered with an HTTP error.

    Args:
        status: the HTTP status.
        message: what the provider said, with where it was asked.
        retry_after: seconds the provider asked to wait (``retry-after``), if it said.
    """

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"embedding provider answered {status}: {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after

    @property
    def document_level(self) -> bool:
        """The provider refused this input (400, 413, 422): the document fails with this error."""
        return self.status in DOCUMENT_LEVEL_STATUSES

    @property
    def retryable(self) -> bool:
        """Every other status (429, 5xx, but also 401/403/404) is retried on the collection's backoff.

        The seed leaves documents pending on any failure that is not the input's fault, so a key or a
        base URL fixed later picks the pass up again.
        """
        return not self.document_level


class EmbeddingConnectionError(Exception):
    """The provider could not be reached, did not answer in time, or a model could not be fetched.

    Always retryable: nothing about the input is wrong.
    """

    @property
    def retryable(self) -> bool:
        return True


def normalise(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length; a zero vector (which has no direction) is returned as is."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:
        return [float(x) for x in vector]
    return [x / norm for x in vector]
