"""The sparse side of hybrid search: a passage or a query as a BM25 sparse vector.

The vectors are computed here, in the process, by ``qdrant_edge.Bm25``: Qdrant's own BM25 model
(Rust, the one a Qdrant server runs for ``qdrant/bm25`` inference), which qdrant-edge-py ships, so
nothing is downloaded and no new dependency comes in. fastembed's ``Qdrant/bm25`` would fetch its
stopword files from the Hugging Face hub on first use, which fails offline; a Qdrant server's own
inference does not exist in Qdrant Edge or in qdrant-client's local mode. Computing them client-side
gives both stores (``chamvi.vectors``) the same vectors.

A passage's vector holds BM25's term-frequency part (``k`` 1.2, ``b`` 0.75, average length 256
tokens, English stopwords and stemming; tokens hashed to 32-bit ids); the IDF part is Qdrant's, the
``Modifier.IDF`` of the collection's sparse vector, so it stays right as documents come and go. A
query's vector weighs each of its distinct tokens 1.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import qdrant_edge as qe

from chamvi.vectors import SparseVector

SPARSE_ENCODER = 1
"""The version of the sparse vectors written: bump it when the tokens or weights of some text change.
A generation records the version it was written with (``CollectionMeta.sparse``); another one is a
new generation, like another model."""


@functools.cache
def _model() -> qe.Bm25:
    return qe.Bm25(qe.Bm25Config(k=1.2, b=0.75, avg_len=256.0, language="english"))


def passage_vectors(texts: Sequence[str]) -> list[SparseVector]:
    """The sparse vector of each passage (about 0.1 ms for 2 000 characters)."""
    model = _model()
    vectors = []
    for text in texts:
        raw = model.embed_document(text)
        vectors.append(SparseVector(raw.indices, raw.values))
    return vectors


def query_vector(query: str) -> SparseVector:
    """The sparse vector of a search query: weight 1 for each distinct token."""
    raw = _model().embed_query(query)
    return SparseVector(raw.indices, raw.values)
