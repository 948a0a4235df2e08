"""The storage protocol every Qdrant-backed store of chamvi speaks, and the values it carries.

Two implementations pass one contract suite (``tests/unit/test_vector_stores.py``):
``chamvi.vectors.edge.EdgeStore`` (Qdrant Edge in process, the embedded default: an Edge shard per
collection under the data folder) and ``chamvi.vectors.client.ClientStore`` (qdrant-client: a Qdrant
server at ``QDRANT_URL``, or qdrant-client's local mode). The knowledge index and agent state are
written against this protocol only, so the names and payloads they store are the same on both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Distance = Literal["cosine", "dot"]
FieldType = Literal["keyword", "integer", "float", "bool", "datetime"]
"""The payload index types a collection can ask for (``VectorStore.create``'s ``indexes``)."""
Scalar = str | int | bool

SPARSE_VECTOR = "bm25"
"""The name of a collection's sparse vector (``create(sparse=True)``); the dense one stays unnamed, so
a collection without a sparse vector is laid out as before. Stored in Qdrant: never renamed."""
RRF_K = 2
"""The ``k`` of reciprocal rank fusion (``hybrid_search``): a point's fused score is the sum of
``1 / (k + rank)`` over the rankings that found it. Qdrant's own default; the paper's 60 lets a point
ranked fair by both sides outrank the one each side ranks first, which ``bench/knowledge.py``
measured as exact identifiers lost."""


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A sparse vector: the weights of a few dimensions (token ids) out of 2^32, the rest zero."""

    indices: Sequence[int]
    values: Sequence[float]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine similarity of two dense vectors (0 when either is all zeros)."""
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norms = sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5
    return dot / norms if norms else 0.0


@dataclass(frozen=True, slots=True)
class Point:
    """A point to write: a stable id (a UUID string), its vector and its payload.

    ``sparse`` is its sparse vector, for a collection created with one (``create(sparse=True)``).
    """

    id: str
    vector: Sequence[float]
    payload: Mapping[str, Any]
    sparse: SparseVector | None = None


@dataclass(frozen=True, slots=True)
class Record:
    """A point read back: its id, its payload (or the keys asked for), its vector when asked."""

    id: str
    payload: dict[str, Any]
    vector: list[float] | None = None
    sparse: SparseVector | None = None
    """Its sparse vector, when vectors were asked for and the collection has them."""


@dataclass(frozen=True, slots=True)
class Scored:
    """A point a vector search returned, with its score (higher is nearer)."""

    id: str
    score: float
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Match:
    """The payload field ``key`` (a dotted path) equals ``value``."""

    key: str
    value: Scalar


@dataclass(frozen=True, slots=True)
class MatchAny:
    """The payload field ``key`` equals one of ``values``."""

    key: str
    values: tuple[str, ...] | tuple[int, ...]


@dataclass(frozen=True, slots=True)
class IsEmpty:
    """The payload field ``key`` is missing, null or an empty list."""

    key: str


Condition = Match | MatchAny | IsEmpty


@dataclass(frozen=True, slots=True)
class Where:
    """A payload filter: every condition of ``must`` holds and none of ``must_not``."""

    must: tuple[Condition, ...] = field(default=())
    must_not: tuple[Condition, ...] = field(default=())


class CollectionNotFoundError(LookupError):
    """The collection does not exist (callers check ``exists`` first where a missing one is normal)."""


class StoreBusyError(RuntimeError):
    """Another process holds the embedded store's folder (Qdrant Edge and local mode lock it)."""


@runtime_checkable
class VectorStore(Protocol):
    """Named collections of points with one dense vector each, a payload, and aliases.

    Every method is a coroutine; an implementation whose client is synchronous keeps the calls off
    the event loop's own work as far as its library lets it (see ``EdgeStore``).
    """

    @property
    def location(self) -> str:
        """Where the points live, for messages: a folder, a URL, or ``:memory:``."""
        ...

    async def exists(self, name: str) -> bool:
        """Whether collection ``name`` exists."""
        ...

    async def collections(self) -> list[str]:
        """The names of every collection, sorted."""
        ...

    async def create(
        self,
        name: str,
        size: int,
        distance: Distance,
        indexes: Mapping[str, FieldType] | None = None,
        *,
        sparse: bool = False,
    ) -> None:
        """Creates collection ``name`` for vectors of ``size`` with payload indexes; an existing one stays.

        ``sparse`` gives its points a sparse vector too (``SPARSE_VECTOR``), whose weights Qdrant
        multiplies by each dimension's inverse document frequency (the IDF modifier) as it searches:
        the term-frequency half of BM25 is written, the IDF half kept current by Qdrant.
        """
        ...

    async def drop(self, name: str) -> None:
        """Deletes collection ``name`` with its points; a missing one is no error."""
        ...

    async def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Writes ``points``, replacing any stored under the same ids."""
        ...

    async def retrieve(
        self, name: str, ids: Sequence[str], payload: bool | Sequence[str] = True, vectors: bool = False
    ) -> list[Record]:
        """The points under ``ids`` (missing ones left out), with their payload or its ``payload`` keys."""
        ...

    async def delete(self, name: str, ids: Sequence[str]) -> None:
        """Deletes the points under ``ids``; missing ones are no error."""
        ...

    async def delete_where(self, name: str, where: Where) -> None:
        """Deletes every point matching ``where``."""
        ...

    async def set_payload(self, name: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        """Sets these payload keys on the points under ``ids``, keeping their other keys."""
        ...

    async def delete_payload(self, name: str, ids: Sequence[str], keys: Sequence[str]) -> None:
        """Removes the payload ``keys`` of the points under ``ids``."""
        ...

    async def count(self, name: str, where: Where | None = None) -> int:
        """How many points (matching ``where``) the collection holds, counted exactly."""
        ...

    async def scroll(
        self,
        name: str,
        *,
        limit: int,
        offset: str | None = None,
        where: Where | None = None,
        payload: bool | Sequence[str] = True,
        vectors: bool = False,
    ) -> tuple[list[Record], str | None]:
        """A page of points in id order from ``offset`` (None: the start), and the next page's offset."""
        ...

    async def search(
        self,
        name: str,
        vector: Sequence[float],
        *,
        limit: int,
        offset: int = 0,
        where: Where | None = None,
        exact: bool = False,
        payload: bool | Sequence[str] = True,
    ) -> list[Scored]:
        """The ``limit`` points nearest to ``vector`` after skipping ``offset``, best first.

        ``exact`` ranks every point (no approximate index), for rankings that must be exact.
        """
        ...

    async def sparse_search(
        self,
        name: str,
        sparse: SparseVector,
        *,
        limit: int,
        where: Where | None = None,
        payload: bool | Sequence[str] = True,
    ) -> list[Scored]:
        """The ``limit`` points whose sparse vectors score highest against ``sparse`` (BM25), best first.

        Only for a collection created with ``sparse=True``.
        """
        ...

    async def hybrid_search(
        self,
        name: str,
        vector: Sequence[float],
        sparse: SparseVector,
        *,
        limit: int,
        where: Where | None = None,
        min_score: float | None = None,
        payload: bool | Sequence[str] = True,
    ) -> list[Scored]:
        """The dense ranking of ``limit`` points fused with the sparse ranking's decisive head.

        One request holding both queries; the fusion is ``chamvi.vectors._fusion.fuse`` (RRF, the
        same on every store). Each score is the cosine of the point's dense vector to ``vector``,
        as ``search`` answers it; ``min_score`` drops points below it, whichever ranking found them.
        Only for a collection created with ``sparse=True``.
        """
        ...

    async def ordered(
        self,
        name: str,
        key: str,
        *,
        limit: int,
        offset: int = 0,
        where: Where | None = None,
        descending: bool = True,
        payload: bool | Sequence[str] = True,
    ) -> list[Record]:
        """The ``limit`` points after ``offset`` in the order of payload field ``key`` (``order_by``).

        ``key`` needs a payload index of a range type (``index_payload``: ``integer``, ``float`` or
        ``datetime``); a point without the field is left out.
        """
        ...

    async def index_payload(self, name: str, key: str, kind: FieldType) -> None:
        """Adds a payload index on ``key`` to an existing collection unless it has one.

        ``create`` makes them for a new collection; this is for one created before it asked for them.
        """
        ...

    async def alias(self, alias: str) -> str | None:
        """The collection ``alias`` points at, or None."""
        ...

    async def set_alias(self, alias: str, target: str) -> None:
        """Points ``alias`` at collection ``target`` in one step: a reader sees the old or the new one."""
        ...

    async def optimize(self, name: str) -> None:
        """Asks for the collection's search index to be built in the background (a server does it itself)."""
        ...

    async def open_all(self) -> None:
        """Opens every collection now, so that no later call pays for it (a worker, before it polls).

        The embedded store opens a collection's files on first use, and that open stalls every thread
        of the process while it lasts (see ``EdgeStore``); a server holds its collections open already.
        """
        ...

    async def close(self) -> None:
        """Releases the store (its folder lock, its connections)."""
        ...
