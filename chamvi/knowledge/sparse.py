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

A search's sparse side holds only the query's *identifier-like* terms (:func:`search_terms`): those
with a digit or an underscore, flags (``--dry-run``), ``camelCase``, ``PascalCase`` and ``ALLCAPS``
words: the exact terms an embedding model blurs. A question in ordinary words has none, and its
dense ranking stands: with every word in it, BM25 put a heading sharing two common words ("How
long refunds take") first for the follow-up "How do I return an item? and how long does that
take?", where the dense ranking had the right passage.
"""

from __future__ import annotations

import functools
import re
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


_IDENTIFIER = re.compile(
    r"(?<![\w-])(?:--?[A-Za-z][\w-]*|[\w.-]*[\d_][\w.-]*|[A-Za-z][a-z]+[A-Z]\w*|[A-Z]{2,}[\w-]*)"
)


def search_terms(query: str) -> list[str]:
    """The identifier-like terms of ``query`` (error codes, SKUs, flags, function and constant names)."""
    return [term for term in _IDENTIFIER.findall(query) if any(c.isalnum() for c in term)]


def search_vector(query: str) -> SparseVector:
    """The sparse side of a hybrid search for ``query``: its identifier-like terms; empty when it has none."""
    terms = search_terms(query)
    return query_vector(" ".join(terms)) if terms else SparseVector([], [])
