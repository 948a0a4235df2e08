"""``test/hash-<dims>``: a deterministic embedder for tests. No model, no network, no meaning.

It hashes a text's lowercased words (and, at half weight, their character trigrams) into ``dims``
signed buckets and scales the result to unit length. Texts that share words therefore score higher
than texts that share none, which is enough for search tests to assert a ranking; it knows nothing
of synonyms or word order. The same text gives the same vector in every process and on every
machine. Never use it for real collections: use ``local/all-minilm-l6-v2`` offline.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator

from chamvi.errors import ModelNotFoundError
from chamvi.knowledge.embedders._base import normalise

MAX_DIMENSIONS = 65_536
_MODEL_ID = re.compile(r"hash-([1-9][0-9]*)")
_WORD = re.compile(r"\w+")
_TRIGRAM_WEIGHT = 0.5


def _features(text: str) -> Iterator[tuple[str, float]]:
    for word in _WORD.findall(text.lower()):
        yield "w:" + word, 1.0
        padded = f"#{word}#"
        for start in range(len(padded) - 2):
            yield "t:" + padded[start : start + 3], _TRIGRAM_WEIGHT


class HashEmbedder:
    """The ``test/hash-<dims>`` embedder.

    Args:
        dimensions: the vector size, 1 to 65 536.
    """

    def __init__(self, dimensions: int) -> None:
        if not 1 <= dimensions <= MAX_DIMENSIONS:
            raise ValueError(f"dimensions must be 1 to {MAX_DIMENSIONS}, not {dimensions}")
        self._dimensions = dimensions

    @classmethod
    def from_model_id(cls, model_id: str) -> HashEmbedder:
        """The registry's factory for ``test/<model_id>``.

        Raises:
            ModelNotFoundError: ``model_id`` is not ``hash-<dims>``.
        """
        match = _MODEL_ID.fullmatch(model_id)
        if match is None or int(match.group(1)) > MAX_DIMENSIONS:
            raise ModelNotFoundError(
                f"embedding model {'test/' + model_id!r} does not resolve: the test provider serves "
                f"'test/hash-<dims>' only, with dims from 1 to {MAX_DIMENSIONS} (e.g. 'test/hash-64')"
            )
        return cls(int(match.group(1)))

    @property
    def ref(self) -> str:
        """The name collections declare this model by; it is stored in their meta."""
        return f"test/hash-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        """The vector size, fixed by the ref, so a generation's collection can be created before any call."""
        return self._dimensions

    def vector(self, text: str) -> list[float]:
        """The unit vector of one text; a text without words maps to a fixed unit vector of its own."""
        buckets = [0.0] * self._dimensions
        found = False
        for feature, weight in _features(text):
            found = True
            self._add(buckets, feature, weight)
        if not found:
            self._add(buckets, "empty:", 1.0)
        return normalise(buckets)

    def _add(self, buckets: list[float], feature: str, weight: float) -> None:
        digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "big")
        sign = 1.0 if digest >> 63 else -1.0
        buckets[digest % self._dimensions] += sign * weight

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order, computed here: no model, no network, same answer every time."""
        return [self.vector(text) for text in texts]
