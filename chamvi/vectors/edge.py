"""The embedded default: Qdrant Edge (``qdrant-edge-py``), Qdrant's own engine in this process.

Layout of the folder (``<data>/qdrant-edge``), names that are contracts like Qdrant's own:

* ``catalog.json``: ``{"collections": {name: shard}, "aliases": {alias: name}}``, the one file that says
  which collections exist, which shard folder holds each, and where each alias points (and, under
  ``"deferred_indexes": {name: {key: type}}``, the payload indexes a collection's first index build
  makes, ``DEFERRED``). It is
  replaced atomically (a temporary file, fsync, rename, fsync of the folder), so an alias switch or
  a swap to an optimized shard is one step and a crash leaves the previous state or the next one;
* ``collections/<name>/shard-<k>/``: the Edge shard of collection ``<name>`` (``edge_config.json``,
  ``segments/``, ``wal/``), one per collection, so one per knowledge generation; a folder the
  catalog does not name is a leftover and is removed on open, and a collection whose folder is gone
  (deleted by hand to rebuild it) is forgotten on open;
* ``.lock``: held (``flock``) by the one process that has the folder open.

Edge builds its HNSW index only when asked (``optimize()``: 72 s for 100 000 384-dimension points
on 2 cores from float32 vectors, 14-20 s from the int8 copies ``vector_params`` keeps, about 3.5 min
for 1 000 000), and qdrant-edge-py 0.9 holds the GIL in every call, that one
included: run in a thread, it would stop the event loop (and the worker's heartbeats) for the
whole build. So
``optimize`` copies the shard after a flush and builds the index on the copy in a child process
(``chamvi.vectors._optimize``), while this process keeps serving searches (by brute force, 21 ms at
100 000 points) and writes from the shard it has; the writes made meanwhile are kept and replayed on
the optimized copy, which then takes the shard's place through the catalog. Every other call is
short (a search ~1 ms, a batch of 64 points ~2 ms) and runs on one thread of the store's own, in
order; on that thread it still holds the GIL, so no call here is made large (pages and batches stay
bounded). One call cannot be kept short: opening a shard (``EdgeShard.load``, on first use and when
an optimized copy swaps in) holds the GIL while it reads from disk what it keeps in memory (the
graph, the id tracker) and its write-ahead log: 0.1-0.5 s at 100 000 points and 0.8 s at
1 000 000 (the GIL held 0.45 s of it) since the int8 copies and payload indexes stay on disk
(``vector_params``, ``_SCHEMAS``; 1.1-2.8 s and 3-9 s before), a stall of every thread of the
worker for as long. So a worker opens every shard before it polls (``open_all``).

A shard is checked before it is loaded: file sizes against what its segments' metadata record
(``chamvi.vectors._edge_damage``), since Edge loads a data file cut short without a word and fails at
a later search, or panics. A damaged shard, or one Edge cannot load, raises ``StoreDamagedError``,
which names the shard and how to rebuild it, on every use of that collection; ``open_all`` logs it
and opens the rest, so a worker serves every other collection.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from chamvi.errors import StoreDamagedError
from chamvi.vectors._edge_damage import shard_damage
from chamvi.vectors._edge_filters import edge_filter, selector
from chamvi.vectors._fusion import decisive, fuse
from chamvi.vectors._types import (
    SPARSE_VECTOR,
    CollectionNotFoundError,
    Distance,
    FieldType,
    Point,
    Record,
    Scored,
    SparseVector,
    StoreBusyError,
    Where,
    cosine,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

CATALOG = "catalog.json"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")
_DISTANCES = {"cosine": qe.Distance.Cosine, "dot": qe.Distance.Dot}
_SCHEMAS: dict[FieldType, Any] = {
    "keyword": qe.KeywordIndexParams(memory=qe.Memory.Cold),
    "integer": qe.IntegerIndexParams(lookup=True, range=True, memory=qe.Memory.Cold),
    "float": qe.FloatIndexParams(memory=qe.Memory.Cold),
    "bool": qe.BoolIndexParams(memory=qe.Memory.Cold),
    "datetime": qe.DatetimeIndexParams(memory=qe.Memory.Cold),
}
"""The payload index of each field type, on disk once its segment is indexed (``Memory.Cold``): kept in
RAM, Edge read each index whole into the heap at every open, a map of every value (a document id
per passage: 0.1-0.6 s of a 100 000-250 000-point shard's open), and kept it there."""
DEFERRED: frozenset[FieldType] = frozenset({"keyword"})
"""Payload index types a collection gets at its first index build, not at ``create``: Edge keeps the
keyword index of a segment that takes writes in RAM whatever its options, a map of every value (a
document id per passage: 744 MB of heap at 1 000 000 passages against 277 MB without it), which the
index builder would load too. Built after the HNSW index, on the indexed segment, it stays on disk
(``Memory.Cold``), and the segments written later index it in RAM as they take writes (small ones).
Until then a filter on the key scans payloads: fast below ``UNINDEXED_MAX`` points, and a first
pass into a new collection has nothing to delete. Range types are built at once: ``ordered``
needs them."""
UNINDEXED_MAX = 20_000
"""Points a shard may hold outside its HNSW index before ``optimize`` builds one: a brute-force search
over 20 000 384-dimension points takes ~4 ms here."""
OVERSAMPLING = 2.0
"""How many more candidates than asked for a search takes from the int8 copies before it rescores
them with the original vectors (so the scores it answers are exact cosines, comparable across
collections and with ``min_score``)."""
_QUANTIZED = qe.SearchParams(
    quantization=qe.QuantizationSearchParams(rescore=True, oversampling=OVERSAMPLING)
)
_EXACT = qe.SearchParams(exact=True)


def vector_params(size: int, distance: Distance) -> qe.EdgeVectorParams:
    """How a collection's vectors are stored: the configuration every user gets.

    A collection of real vectors (a knowledge generation) keeps its float32 originals on disk, read
    as searches touch them (``Memory.Cold``), and an int8 copy of each (scalar quantization, a
    quarter of the size), which the HNSW index is built from and searched on; the candidates are
    rescored with the originals. The int8 copies stay on disk too (``Memory.Cold``): mapped, they
    come into the page cache as searches touch them, where the kernel may drop them again. Kept in
    RAM (``Memory.Pinned``, before), Edge copied them into the heap at every open, a page fault at a
    time: 1.2-1.9 s of a 100 000-point shard's open (38 MB), holding the GIL, against 0.1-0.4 s now
    for the whole open. Edge's default for the originals (``Memory.Cached``) reads the whole file
    into memory at every open (``MADV_POPULATE_READ``: 1.5 GB at 1 000 000 points). A segment keeps
    the placement it was built with, so a folder written before opens as it was. Payload-only
    collections (one placeholder dimension) stay plain.
    """
    if size <= 1:
        return qe.EdgeVectorParams(size=size, distance=_DISTANCES[distance])
    return qe.EdgeVectorParams(
        size=size,
        distance=_DISTANCES[distance],
        memory=qe.Memory.Cold,
        quantization_config=qe.ScalarQuantizationConfig(
            qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Cold
        ),
    )


def _uuid(raw: object) -> str:
    return str(raw)


def write_atomically(path: Path, data: bytes) -> None:
    """Replaces ``path`` with ``data`` in one step: a reader, or a crash, sees the old file or the new one."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


@dataclass
class _Shard:
    shard: qe.EdgeShard
    number: int
    journal: list[qe.UpdateOperation] | None = None
    """The writes made while a copy of this shard is optimized, replayed on the copy before it swaps in."""


@dataclass
class _Catalog:
    collections: dict[str, int] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    deferred: dict[str, dict[str, FieldType]] = field(default_factory=dict)
    """Per collection, the keyword indexes its first index build makes (``DEFERRED``)."""


class EdgeStore:
    """The storage protocol on Qdrant Edge shards in a folder (see the module docstring for the layout).

    Args:
        root: the folder; created when missing.
        index_threshold: how many points a shard may hold outside its HNSW index before ``optimize``
            builds it (below that a brute-force search is fast enough).
        temporary: delete the folder on ``close`` (``memory_index``: Edge has no in-memory mode).

    Raises:
        StoreBusyError: another process (or another store in this one) has the folder open.
    """

    def __init__(
        self, root: Path | str, *, index_threshold: int = UNINDEXED_MAX, temporary: bool = False
    ) -> None:
        self.root = Path(root)
        self.temporary = temporary
        self.root.mkdir(parents=True, exist_ok=True)
        self.index_threshold = index_threshold
        self._lock_file = open(self.root / ".lock", "a+b")  # noqa: SIM115 (held until close)
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise StoreBusyError(f"another process has the Qdrant Edge folder {self.root} open") from None
        self._catalog = self._read_catalog()
        self._remove_leftovers()
        self._forget_missing()
        self._shards: dict[str, _Shard] = {}
        self._damaged: dict[str, str] = {}
        """The message of each collection found damaged, raised again on every use without a reload."""
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chamvi-edge")
        self._optimizing: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._closed = False

    def __repr__(self) -> str:
        return f"EdgeStore({str(self.root)!r})"

    @property
    def location(self) -> str:
        """The folder (``:memory:`` for a temporary one)."""
        return ":memory:" if self.temporary else str(self.root)

    # ---- the catalog and the folders -----------------------------------------------------------

    def _read_catalog(self) -> _Catalog:
        path = self.root / CATALOG
        if not path.exists():
            return _Catalog()
        raw = json.loads(path.read_text())
        return _Catalog(
            dict(raw.get("collections", {})),
            dict(raw.get("aliases", {})),
            {name: dict(indexes) for name, indexes in raw.get("deferred_indexes", {}).items()},
        )

    def _save_catalog(self) -> None:
        data: dict[str, Any] = {"collections": self._catalog.collections, "aliases": self._catalog.aliases}
        if self._catalog.deferred:
            data["deferred_indexes"] = self._catalog.deferred
        write_atomically(self.root / CATALOG, json.dumps(data, indent=1, sort_keys=True).encode())

    def _folder(self, name: str) -> Path:
        if not _NAME.match(name) or name in (".", ".."):
            raise ValueError(f"collection name {name!r} cannot name a folder")
        return self.root / "collections" / name

    def _shard_path(self, name: str, number: int) -> Path:
        return self._folder(name) / f"shard-{number}"

    def _remove_leftovers(self) -> None:
        """Deletes folders the catalog does not name: a drop, a create or an optimization cut short."""
        collections = self.root / "collections"
        if not collections.is_dir():
            return
        for folder in collections.iterdir():
            number = self._catalog.collections.get(folder.name)
            if number is None:
                shutil.rmtree(folder, ignore_errors=True)
                continue
            for shard in folder.iterdir():
                if shard.name != f"shard-{number}":
                    shutil.rmtree(shard, ignore_errors=True)

    def _forget_missing(self) -> None:
        """Takes out of the catalog a collection whose shard folder is gone: deleted to rebuild it."""
        missing = [n for n, k in self._catalog.collections.items() if not self._shard_path(n, k).is_dir()]
        for name in missing:
            log.warning("the shard folder of collection %r is gone from %s: forgotten", name, self.root)
            del self._catalog.collections[name]
            self._catalog.deferred.pop(name, None)
            self._catalog.aliases = {a: t for a, t in self._catalog.aliases.items() if t != name}
        if missing:
            self._save_catalog()

    # ---- the thread every Edge call runs on ----------------------------------------------------

    async def _run(self, call: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise RuntimeError(f"the Qdrant Edge store {self.root} is closed")
        return await asyncio.get_running_loop().run_in_executor(self._thread, call, *args)

    def _open(self, name: str) -> _Shard | None:
        """The loaded shard of ``name`` (loaded on first use), or None when there is no such collection."""
        shard = self._shards.get(name)
        if shard is not None:
            return shard
        number = self._catalog.collections.get(name)
        if number is None:
            return None
        shard = _Shard(self._load(name, self._shard_path(name, number)), number)
        self._shards[name] = shard
        return shard

    def _load(self, name: str, path: Path) -> qe.EdgeShard:
        """Loads the shard at ``path`` if its files are whole.

        Raises:
            StoreDamagedError: a file is shorter or longer than its segment's metadata says, or Edge
                cannot load the shard (an error, or a panic in its Rust code).
        """
        if name not in self._damaged:
            problem = shard_damage(path)
            if problem is None:
                try:
                    return qe.EdgeShard.load(str(path))
                except BaseException as error:
                    # pyo3's PanicException derives from BaseException: a panic must not end the worker
                    if not isinstance(error, Exception) and type(error).__name__ != "PanicException":
                        raise
                    detail = " ".join(str(error).split())[:300]
                    problem = f"Qdrant Edge cannot load it ({type(error).__name__}: {detail})"
            self._damaged[name] = (
                f"collection {name!r} of the Qdrant Edge store is damaged: {problem}, in its shard {path}. "
                f"It is not served until it is rebuilt: stop the worker, delete the folder "
                f"{self._folder(name)} and start the worker again. A knowledge generation "
                "('<prefix>_<collection>_g<N>') is then rebuilt from its collection's sources by the next "
                "pass (`chamvi knowledge sync <collection>` asks for one now); any other collection "
                "(documents sent through the API, agent state) comes back only from a backup of the folder"
            )
        raise StoreDamagedError(self._damaged[name])

    def _get(self, name: str) -> _Shard:
        shard = self._open(name)
        if shard is None:
            raise CollectionNotFoundError(f"collection {name!r} does not exist in {self.root}")
        return shard

    def _update(self, name: str, operation: qe.UpdateOperation, *, missing_ok: bool = False) -> None:
        shard = self._open(name)
        if shard is None:
            if missing_ok:
                return
            raise CollectionNotFoundError(f"collection {name!r} does not exist in {self.root}")
        shard.shard.update(operation)
        if shard.journal is not None:
            shard.journal.append(operation)

    async def open_all(self) -> None:
        """Loads the shard of every collection the catalog names, one call each on the store's thread.

        Each load holds the GIL for as long as it reads (``EdgeShard.load`` never releases it), so a
        worker calls this before it polls: then no activity, heartbeat or poll of the worker stalls
        behind a first use (``ChamviPlugin.prepare``).

        A damaged collection is logged and left out, so the worker serves the others; each use of it
        raises ``StoreDamagedError``.
        """
        for name in sorted(self._catalog.collections):
            try:
                await self._run(self._open, name)
            except StoreDamagedError as error:
                log.error("%s", error)

    # ---- collections ---------------------------------------------------------------------------

    async def exists(self, name: str) -> bool:
        """Whether the catalog names collection ``name``."""
        return name in self._catalog.collections

    async def collections(self) -> list[str]:
        """Every collection's name, sorted."""
        return sorted(self._catalog.collections)

    async def create(
        self,
        name: str,
        size: int,
        distance: Distance,
        indexes: Mapping[str, FieldType] | None = None,
        *,
        sparse: bool = False,
    ) -> None:
        """Creates the shard, its payload indexes, then names it in the catalog; an existing one stays."""
        await self._run(self._create, name, size, distance, dict(indexes or {}), sparse)

    def _create(
        self, name: str, size: int, distance: Distance, indexes: dict[str, FieldType], sparse: bool
    ) -> None:
        if name in self._catalog.collections:
            return
        path = self._shard_path(name, 0)
        shutil.rmtree(path, ignore_errors=True)  # a create cut short before the catalog named it
        sparse_vectors = (
            {SPARSE_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if sparse else None
        )
        config = qe.EdgeConfig(vectors=vector_params(size, distance), sparse_vectors=sparse_vectors)
        shard = qe.EdgeShard.create(str(path), config)
        for key, kind in indexes.items():
            if kind not in DEFERRED:
                shard.update(qe.UpdateOperation.create_field_index(key, _SCHEMAS[kind]))
        shard.flush()
        self._shards[name] = _Shard(shard, 0)
        self._catalog.collections[name] = 0
        deferred = {key: kind for key, kind in indexes.items() if kind in DEFERRED}
        if deferred:
            self._catalog.deferred[name] = deferred
        self._save_catalog()

    async def drop(self, name: str) -> None:
        """Takes the collection out of the catalog (one step), then deletes its folder."""
        task = self._optimizing.get(name)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._run(self._drop, name)

    def _drop(self, name: str) -> None:
        if name not in self._catalog.collections:
            return
        shard = self._shards.pop(name, None)
        self._damaged.pop(name, None)
        del self._catalog.collections[name]
        self._catalog.deferred.pop(name, None)
        self._catalog.aliases = {a: t for a, t in self._catalog.aliases.items() if t != name}
        self._save_catalog()
        if shard is not None:
            shard.shard.close()
        shutil.rmtree(self._folder(name), ignore_errors=True)

    # ---- points --------------------------------------------------------------------------------

    async def upsert(self, name: str, points: Sequence[Point]) -> None:
        """Writes the points, replacing those under the same ids."""
        if points:
            await self._run(self._upsert, name, points)

    def _upsert(self, name: str, points: Sequence[Point]) -> None:
        edge_points = [qe.Point(p.id, _edge_vector(p), dict(p.payload)) for p in points]
        self._update(name, qe.UpdateOperation.upsert_points(edge_points))

    async def retrieve(
        self, name: str, ids: Sequence[str], payload: bool | Sequence[str] = True, vectors: bool = False
    ) -> list[Record]:
        """The points under ``ids`` that exist."""
        if not ids:
            return []
        return await self._run(self._retrieve, name, list(ids), selector(payload), vectors)

    def _retrieve(self, name: str, ids: list[str], payload: bool | list[str], vectors: bool) -> list[Record]:
        points: list[Any] = ids  # str ids; the stub's list[int | UUID | str] is invariant
        records = self._get(name).shard.retrieve(points, payload, vectors)
        return [_record(r, vectors) for r in records]

    async def delete(self, name: str, ids: Sequence[str]) -> None:
        """Deletes the points under ``ids``."""
        if ids:
            await self._run(
                lambda: self._update(name, qe.UpdateOperation.delete_points(list(ids)), missing_ok=True)
            )

    async def delete_where(self, name: str, where: Where) -> None:
        """Deletes the points matching ``where``."""
        condition = edge_filter(where)
        assert condition is not None
        await self._run(
            lambda: self._update(name, qe.UpdateOperation.delete_points_by_filter(condition), missing_ok=True)
        )

    async def set_payload(self, name: str, ids: Sequence[str], payload: Mapping[str, Any]) -> None:
        """Sets payload keys on these points."""
        if ids:
            await self._run(
                lambda: self._update(name, qe.UpdateOperation.set_payload(list(ids), dict(payload)))
            )

    async def delete_payload(self, name: str, ids: Sequence[str], keys: Sequence[str]) -> None:
        """Removes payload keys of these points."""
        if ids:
            operation = qe.UpdateOperation.delete_payload(list(ids), list(keys))
            await self._run(lambda: self._update(name, operation, missing_ok=True))

    async def count(self, name: str, where: Where | None = None) -> int:
        """The exact number of points (matching ``where``)."""
        request = qe.CountRequest(exact=True, filter=edge_filter(where))
        return await self._run(lambda: self._get(name).shard.count(request))

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
        request = qe.ScrollRequest(
            offset=offset,
            limit=limit,
            filter=edge_filter(where),
            with_payload=selector(payload),
            with_vector=vectors,
        )

        def scroll() -> tuple[list[Record], str | None]:
            records, after = self._get(name).shard.scroll(request)
            return [_record(r, vectors) for r in records], _uuid(after) if after is not None else None

        return await self._run(scroll)

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
        """The nearest points, best first (by the HNSW index once built, else by brute force)."""
        request = qe.QueryRequest(
            limit=limit,
            offset=offset or None,
            query=qe.Query.Nearest(list(vector)),
            filter=edge_filter(where),
            with_payload=selector(payload),
            params=_EXACT if exact else _QUANTIZED,
        )

        def search() -> list[Scored]:
            points = self._get(name).shard.query(request)
            return [Scored(_uuid(p.id), float(p.score), dict(p.payload or {})) for p in points]

        return await self._run(search)

    async def sparse_search(
        self,
        name: str,
        sparse: SparseVector,
        *,
        limit: int,
        where: Where | None = None,
        payload: bool | Sequence[str] = True,
    ) -> list[Scored]:
        """The points best scored by their sparse vectors (always exact: Edge's sparse index is inverted)."""
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(_edge_sparse(sparse), using=SPARSE_VECTOR),
            filter=edge_filter(where),
            with_payload=selector(payload),
        )
        return await self._run(self._query, name, request)

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
        """Both queries in one Edge batch (one pass over the segments), fused here."""
        condition = edge_filter(where)
        batch = qe.QueryBatchRequest(
            [
                qe.QueryRequest(
                    limit=limit,
                    query=qe.Query.Nearest(list(vector)),
                    filter=condition,
                    with_payload=selector(payload),
                    params=_QUANTIZED,
                ),
                qe.QueryRequest(
                    limit=2,
                    query=qe.Query.Nearest(_edge_sparse(sparse), using=SPARSE_VECTOR),
                    filter=condition,
                    with_payload=selector(payload),
                    with_vector=[""],
                ),
            ]
        )

        def hybrid() -> list[Scored]:
            dense, best = self._get(name).shard.query_batch(batch)
            ranked = [Scored(_uuid(p.id), float(p.score), dict(p.payload or {})) for p in dense]
            head = _cosine_scored(best[0], vector) if decisive([p.score for p in best]) else None
            return fuse(ranked, head, limit, min_score)

        return await self._run(hybrid)

    def _query(self, name: str, request: qe.QueryRequest) -> list[Scored]:
        points = self._get(name).shard.query(request)
        return [Scored(_uuid(p.id), float(p.score), dict(p.payload or {})) for p in points]

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
        """A page in the order of payload field ``key``, read through its range index."""
        direction = qe.Direction.Desc if descending else qe.Direction.Asc
        request = qe.QueryRequest(
            limit=limit,
            offset=offset or None,
            query=qe.OrderBy(key, direction),
            filter=edge_filter(where),
            with_payload=selector(payload),
        )

        def ordered() -> list[Record]:
            points = self._get(name).shard.query(request)
            return [Record(_uuid(p.id), dict(p.payload or {})) for p in points]

        return await self._run(ordered)

    async def index_payload(self, name: str, key: str, kind: FieldType) -> None:
        """Adds the payload index to the shard unless its schema has it (an optimization copy gets it too)."""

        def index() -> None:
            if key in self._catalog.deferred.get(name, {}):
                return  # the next index build makes it
            if key not in self._get(name).shard.info().payload_schema:
                self._update(name, qe.UpdateOperation.create_field_index(key, _SCHEMAS[kind]))

        await self._run(index)

    # ---- aliases -------------------------------------------------------------------------------

    async def alias(self, alias: str) -> str | None:
        """The collection the alias points at."""
        return self._catalog.aliases.get(alias)

    async def set_alias(self, alias: str, target: str) -> None:
        """Points the alias at ``target`` with one atomic write of the catalog."""

        def switch() -> None:
            if target not in self._catalog.collections:
                raise CollectionNotFoundError(f"collection {target!r} does not exist in {self.root}")
            self._catalog.aliases[alias] = target
            self._save_catalog()

        await self._run(switch)

    # ---- the search index, built in a child process --------------------------------------------

    async def optimize(self, name: str) -> None:
        """Starts building the collection's HNSW index in the background, if enough points lack one.

        Returns at once. Searches and writes go on meanwhile; a call while one runs asks for one more.
        """
        if self._closed or name not in self._catalog.collections:
            return
        if name in self._optimizing:
            self._again.add(name)
            return
        task = asyncio.get_running_loop().create_task(self._optimize(name), name=f"optimize {name}")
        self._optimizing[name] = task

    async def optimized(self) -> None:
        """Waits until every optimization started so far has ended (for tests and benchmarks)."""
        while self._optimizing:
            await asyncio.gather(*self._optimizing.values(), return_exceptions=True)

    async def _optimize(self, name: str) -> None:
        try:
            while True:
                copy = await self._run(self._begin_copy, name)
                if copy is None:
                    return
                if not await self._build_index(copy, self._catalog.deferred.get(name, {})):
                    await self._run(self._abandon_copy, name, copy)
                    return
                await self._run(self._swap, name, copy)
                if name not in self._again:
                    return
                self._again.discard(name)
        except asyncio.CancelledError:
            if not self._closed:
                await self._run(self._abandon_copy, name, None)
            raise
        except Exception:
            log.exception("building the search index of %r failed; searches go on by brute force", name)
        finally:
            self._optimizing.pop(name, None)

    def _begin_copy(self, name: str) -> Path | None:
        """Flushes the shard and copies it, then keeps its writes for the copy; None: nothing to index."""
        shard = self._open(name)
        if shard is None:
            return None
        info = shard.shard.info()
        if info.points_count - info.indexed_vectors_count <= self.index_threshold:
            return None
        shard.shard.flush()
        copy = self._shard_path(name, shard.number + 1)
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(self._shard_path(name, shard.number), copy, ignore=shutil.ignore_patterns("*.lock"))
        shard.journal = []
        return copy

    async def _build_index(self, copy: Path, deferred: dict[str, FieldType]) -> bool:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "chamvi.vectors._optimize",
            str(copy),
            json.dumps(deferred),
            str(os.getpid()),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            _, error = await process.communicate()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        if process.returncode != 0:
            log.warning(
                "building the search index in %s failed: %s", copy, error.decode(errors="replace")[-500:]
            )
            return False
        return True

    def _abandon_copy(self, name: str, copy: Path | None) -> None:
        shard = self._shards.get(name)
        if shard is not None:
            shard.journal = None
            copy = copy or self._shard_path(name, shard.number + 1)
        if copy is not None:
            shutil.rmtree(copy, ignore_errors=True)

    def _swap(self, name: str, copy: Path) -> None:
        """Replays the writes made meanwhile on the optimized copy, then lets the catalog name it."""
        shard = self._shards.get(name)
        if shard is None or shard.journal is None or name not in self._catalog.collections:
            shutil.rmtree(copy, ignore_errors=True)  # dropped meanwhile
            return
        optimized = qe.EdgeShard.load(str(copy))
        for operation in shard.journal:
            optimized.update(operation)
        optimized.flush()
        old = shard.number
        self._catalog.collections[name] = old + 1
        self._catalog.deferred.pop(name, None)  # the copy has them now
        self._save_catalog()
        self._shards[name] = _Shard(optimized, old + 1)
        shard.shard.close()
        shutil.rmtree(self._shard_path(name, old), ignore_errors=True)

    # ---- closing -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Stops index builds (their copies are dropped), flushes and closes every shard, frees the folder."""
        if self._closed:
            return
        for task in list(self._optimizing.values()):
            task.cancel()
        await asyncio.gather(*self._optimizing.values(), return_exceptions=True)
        await self._run(self._close_all)
        self._closed = True
        self._thread.shutdown(wait=True)
        self._lock_file.close()
        if self.temporary:
            shutil.rmtree(self.root, ignore_errors=True)

    def _close_all(self) -> None:
        for name, shard in self._shards.items():
            if shard.journal is not None:
                self._abandon_copy(name, None)
            shard.shard.flush()
            shard.shard.close()
        self._shards.clear()


def _cosine_scored(point: qe.ScoredPoint, vector: Sequence[float]) -> Scored:
    dense: Any = point.vector
    if isinstance(dense, dict):
        dense = dense.get("")
    return Scored(_uuid(point.id), cosine(vector, dense or [0.0] * len(vector)), dict(point.payload or {}))


def _edge_sparse(sparse: SparseVector) -> qe.SparseVector:
    return qe.SparseVector(list(sparse.indices), list(sparse.values))


def _edge_vector(point: Point) -> Any:
    if point.sparse is None:
        return list(point.vector)
    return {"": list(point.vector), SPARSE_VECTOR: _edge_sparse(point.sparse)}


def _record(raw: qe.Record, vectors: bool) -> Record:
    vector: Any = raw.vector if vectors else None  # the unnamed dense vector: a list of floats
    sparse: SparseVector | None = None
    if isinstance(vector, dict):  # with a sparse vector beside it, Edge names the dense one ""
        terms = vector.get(SPARSE_VECTOR)
        if terms is not None:
            sparse = SparseVector(list(terms.indices), list(terms.values))
        vector = vector.get("")
    return Record(
        _uuid(raw.id), dict(raw.payload or {}), [float(x) for x in vector] if vector else None, sparse
    )
