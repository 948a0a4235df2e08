"""The storage protocol over qdrant-client: a Qdrant server (``QDRANT_URL``), or qdrant-client's local mode.

A server is where several processes share one store (workers and the API on other machines). Local
mode (``path=`` or ``:memory:``) is qdrant-client's tool for tests: every point as Python objects,
brute-force search; it stays usable here (and reads the folders earlier versions wrote, for
``chamvi.vectors.migrate``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient, models

from chamvi.vectors._fusion import decisive, fuse
from chamvi.vectors._types import (
    SPARSE_VECTOR,
    CollectionNotFoundError,
    Condition,
    Distance,
    FieldType,
    Match,
    MatchAny,
    Point,
    Record,
    Scored,
    SparseVector,
    Where,
    cosine,
)

_DISTANCES = {"cosine": models.Distance.COSINE, "dot": models.Distance.DOT}
_SCHEMAS = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "integer": models.PayloadSchemaType.INTEGER,
    "float": models.PayloadSchemaType.FLOAT,
    "bool": models.PayloadSchemaType.BOOL,
    "datetime": models.PayloadSchemaType.DATETIME,
}
_EXACT = models.SearchParams(exact=True)


def _condition(condition: Condition) -> models.Condition:
    if isinstance(condition, Match):
        return models.FieldCondition(key=condition.key, match=models.MatchValue(value=condition.value))
    if isinstance(condition, MatchAny):
        values: list[str] | list[int] = list(condition.values)  # type: ignore[assignment]
        return models.FieldCondition(key=condition.key, match=models.MatchAny(any=values))
    return models.IsEmptyCondition(is_empty=models.PayloadField(key=condition.key))


def client_filter(where: Where | None) -> models.Filter | None:
    """``where`` as qdrant-client's filter (None stays None)."""
    if where is None:
        return None
    return models.Filter(
        must=[_condition(c) for c in where.must] or None,
        must_not=[_condition(c) for c in where.must_not] or None,
    )


def _selector(payload: bool | Sequence[str]) -> bool | list[str]:
    return payload if isinstance(payload, bool) else list(payload)


def _vector(raw: Any) -> list[float] | None:
    if isinstance(raw, dict):  # with a sparse vector beside it, the dense one is named ""
        raw = raw.get("")
    if raw is None:
        return None
    return [float(x) for x in raw]


def _record(point: models.Record, vectors: bool) -> Record:
    sparse = None
    if vectors and isinstance(point.vector, dict):
        terms = point.vector.get(SPARSE_VECTOR)
        if isinstance(terms, models.SparseVector):
            sparse = SparseVector(list(terms.indices), list(terms.values))
    return Record(
        str(point.id), dict(point.payload or {}), _vector(point.vector) if vectors else None, sparse
    )


def _sparse(sparse: SparseVector) -> models.SparseVector:
    return models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))


def _point_vector(point: Point) -> Any:
    if point.sparse is None:
        return list(point.vector)
    return {"": list(point.vector), SPARSE_VECTOR: _sparse(point.sparse)}


class ClientStore:
    """The storage protocol through an ``AsyncQdrantClient``.

    Args:
        client: a client of a Qdrant server, or of local mode (``path=``, ``location=":memory:"``).
    """

    def __init__(self, client: AsyncQdrantClient) -> None:
        self.client = client
        options = client.init_options
        self._local_path = options.get("path")
        self.local = self._local_path is not None or options.get("location") == ":memory:"
        self._location = str(
            self._local_path or options.get("url") or options.get("location") or options.get("host") or ""
        )

    def __repr__(self) -> str:
        return f"ClientStore({self.location!r})"

    @property
    def location(self) -> str:
        """The server's URL, the local-mode folder, or ``:memory:``."""
        return self._location

    async def exists(self, name: str) -> bool:
        """Whether collection ``name`` exists."""
        return await self.client.collection_exists(name)

    async def collections(self) -> list[str]:
        """Every collection's name, sorted."""
        return sorted(c.name for c in (await self.client.get_collections()).collections)

    async def create(
        self,
        name: str,
        size: int,
        distance: Distance,
        indexes: Mapping[str, FieldType] | None = None,
        *,
        sparse: bool = False,
    ) -> None:
        """Creates the collection and its payload indexes unless it exists (a concurrent create is fine)."""
        if await self.client.collection_exists(name):
            return
        sparse_config = (
            {SPARSE_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)} if sparse else None
        )
        try:
            await self.client.create_collection(
                name,
                vectors_config=models.VectorParams(size=size, distance=_DISTANCES[distance]),
                sparse_vectors_config=sparse_config,
            )
        except Exception:
            # another process created it between the check and the create: that is all we wanted
            if not await self.client.collection_exists(name):
                raise
        for key, kind in (indexes or {}).items():
            with warnings.catch_warnings():  # local mode has no payload indexes and says so
                warnings.simplefilter("ignore", UserWarning)
                await self.client.create_payload_index(name, key, _SCHEMAS[kind])

    async def drop(self, name: str) -> None:
        """Deletes the collection; a missing one is no error."""
        if await self.client.collection_exists(name):
            await self.client.delete_collection(name)

    async def _check(self, name: str) -> None:
        if not await self.client.collection_exists(name):
            raise CollectionNotFoundError(f"collection {name!r} does not exist in {self.location}")

    async def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Writes the points, replacing those under the same ids."""
        if not points:
            return
        await self._check(name)
        await self.client.upsert(
            name,
            points=[
                models.PointStruct(id=p.id, vector=_point_vector(p), payload=dict(p.payload)) for p in points
            ],
        )

    async def retrieve(
        self, name: str, ids: Sequence[str], payload: bool | Sequence[str] = True, vectors: bool = False
    ) -> list[Record]:
        """The points under ``ids`` that exist."""
        if not ids:
            return []
        await self._check(name)
        points = await self.client.retrieve(
            name, ids=list(ids), with_payload=_selector(payload), with_vectors=vectors
        )
        return [_record(p, vectors) for p in points]

    async def delete(self, name: str, ids: Sequence[str]) -> None:
        """Deletes the points under ``ids``."""
        if ids and await self.client.collection_exists(name):
            selected: list[models.ExtendedPointId] = list(ids)
            await self.client.delete(name, points_selector=models.PointIdsList(points=selected))

    async def delete_where(self, name: str, where: Where) -> None:
        """Deletes the points matching ``where``."""
        if await self.client.collection_exists(name):
            condition = client_filter(where)
            assert condition is not None
            await self.client.delete(name, points_selector=models.FilterSelector(filter=condition))

    async def set_payload(self, name: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        """Sets payload keys on these points."""
        if ids:
            await self._check(name)
            await self.client.set_payload(
                name, payload=dict(payload), points=models.PointIdsList(points=list(ids))
            )

    async def delete_payload(self, name: str, ids: Sequence[str], keys: Sequence[str]) -> None:
        """Removes payload keys of these points."""
        if ids and await self.client.collection_exists(name):
            await self.client.delete_payload(
                name, keys=list(keys), points=models.PointIdsList(points=list(ids))
            )

    async def count(self, name: str, where: Where | None = None) -> int:
        """The exact number of points (matching ``where``)."""
        await self._check(name)
        return (await self.client.count(name, count_filter=client_filter(where), exact=True)).count

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
        """A page of points in id order, and the next page's offset."""
        await self._check(name)
        points, after = await self.client.scroll(
            name,
            scroll_filter=client_filter(where),
            limit=limit,
            offset=offset,
            with_payload=_selector(payload),
            with_vectors=vectors,
        )
        records = [_record(p, vectors) for p in points]
        return records, str(after) if after is not None else None

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
        """The nearest points, best first; local mode always ranks exactly (and warns when asked to)."""
        await self._check(name)
        result = await self.client.query_points(
            name,
            query=list(vector),
            query_filter=client_filter(where),
            limit=limit,
            offset=offset or None,
            with_payload=_selector(payload),
            search_params=_EXACT if exact and not self.local else None,
        )
        return [Scored(str(p.id), float(p.score), dict(p.payload or {})) for p in result.points]

    async def sparse_search(
        self,
        name: str,
        sparse: SparseVector,
        *,
        limit: int,
        where: Where | None = None,
        payload: bool | Sequence[str] = True,
    ) -> list[Scored]:
        """The points best scored by their sparse vectors."""
        await self._check(name)
        result = await self.client.query_points(
            name,
            query=_sparse(sparse),
            using=SPARSE_VECTOR,
            query_filter=client_filter(where),
            limit=limit,
            with_payload=_selector(payload),
        )
        return [Scored(str(p.id), float(p.score), dict(p.payload or {})) for p in result.points]

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
        """Both queries in one batch request, fused here."""
        await self._check(name)
        condition = client_filter(where)
        dense, best = await self.client.query_batch_points(
            name,
            requests=[
                models.QueryRequest(
                    query=list(vector), filter=condition, limit=limit, with_payload=_selector(payload)
                ),
                models.QueryRequest(
                    query=_sparse(sparse),
                    using=SPARSE_VECTOR,
                    filter=condition,
                    limit=2,
                    with_payload=_selector(payload),
                    with_vector=[""],
                ),
            ],
        )
        ranked = [Scored(str(p.id), float(p.score), dict(p.payload or {})) for p in dense.points]
        head = None
        if decisive([p.score for p in best.points]):
            top = best.points[0]
            head = Scored(
                str(top.id),
                cosine(vector, _vector(top.vector) or [0.0] * len(vector)),
                dict(top.payload or {}),
            )
        return fuse(ranked, head, limit, min_score)

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
        """A page in the order of payload field ``key`` (local mode sorts the matching points in Python)."""
        await self._check(name)
        direction = models.Direction.DESC if descending else models.Direction.ASC
        order = models.OrderBy(key=key, direction=direction)
        result = await self.client.query_points(
            name,
            query=models.OrderByQuery(order_by=order),
            query_filter=client_filter(where),
            limit=limit,
            offset=offset or None,
            with_payload=_selector(payload),
        )
        return [Record(str(p.id), dict(p.payload or {})) for p in result.points]

    async def index_payload(self, name: str, key: str, kind: FieldType) -> None:
        """Adds the payload index unless the collection's schema has it (local mode has none: a no-op)."""
        await self._check(name)
        if self.local:
            return
        info = await self.client.get_collection(name)
        if key not in (info.payload_schema or {}):
            await self.client.create_payload_index(name, key, _SCHEMAS[kind], wait=True)

    async def alias(self, alias: str) -> str | None:
        """The collection the alias points at."""
        for found in (await self.client.get_aliases()).aliases:
            if found.alias_name == alias:
                return found.collection_name
        return None

    async def set_alias(self, alias: str, target: str) -> None:
        """Deletes and creates the alias in one request, so searches never see it missing."""
        operations: list[Any] = []
        if await self.alias(alias) is not None:
            operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        operations.append(
            models.CreateAliasOperation(
                create_alias=models.CreateAlias(collection_name=target, alias_name=alias)
            )
        )
        await self.client.update_collection_aliases(change_aliases_operations=operations)

    async def optimize(self, name: str) -> None:
        """Nothing to do: a server indexes by itself, local mode never does."""

    async def open_all(self) -> None:
        """Nothing to do: a server holds its collections open, local mode loads them all at its start."""

    async def close(self) -> None:
        """Closes the client."""
        await self.client.close()
