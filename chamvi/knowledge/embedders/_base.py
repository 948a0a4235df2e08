"""The contract every embedding model keeps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol


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


def normalise(vector: Sequence[float]) -> list[float]:
    """``vector`` scaled to unit length; a zero vector (which has no direction) is returned as is."""
    norm = math.hypot(*vector)  # in C; as accurate as a sum of squares by fsum, 10x faster at 1536
    if norm == 0.0:
        return [float(x) for x in vector]
    return [x / norm for x in vector]
