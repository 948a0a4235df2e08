"""Carries a data folder written by qdrant-client's local mode over to Qdrant Edge, losing nothing.

Before Qdrant Edge became the embedded default, ``<data>/qdrant`` held every collection in local
mode (one SQLite file per collection, aliases in ``meta.json``). On the first start after the
upgrade, ``open_index`` finds that folder and no ``<data>/qdrant-edge`` and calls
:func:`migrate_local_folder`: every collection is copied point by point (ids, vectors, payloads,
as stored), with the payload indexes its kind needs, and every alias; the counts are compared; the
copy is written into ``<data>/qdrant-edge.partial`` and renamed into place when complete (a crash
midway starts over on the next start), and the local-mode folder is renamed to
``<data>/qdrant.migrated``, kept until you delete it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from qdrant_client import AsyncQdrantClient, models

from chamvi.vectors._types import SPARSE_VECTOR, Distance, FieldType, Point
from chamvi.vectors.client import ClientStore
from chamvi.vectors.edge import EdgeStore

log = logging.getLogger(__name__)

MIGRATED_SUFFIX = ".migrated"
_PAGE = 1_000
_GENERATION = re.compile(r"_g\d+$")
_DISTANCES: dict[models.Distance, Distance] = {
    models.Distance.COSINE: "cosine",
    models.Distance.DOT: "dot",
}


@dataclass(frozen=True)
class Migration:
    """What a migration carried over: collections, points, aliases, and where the old folder went."""

    collections: int
    points: int
    aliases: int
    backup: Path


def is_local_mode_folder(path: Path) -> bool:
    """Whether ``path`` holds qdrant-client local-mode storage (its ``meta.json``)."""
    return (path / "meta.json").is_file()


def _indexes(name: str) -> dict[str, FieldType]:
    # a knowledge generation is deleted from by document (knowledge names hold no '_')
    return {"document": "keyword"} if _GENERATION.search(name) else {}


async def _copy(source: AsyncQdrantClient, target: EdgeStore) -> tuple[int, int, int]:
    reader = ClientStore(source)
    collections = await reader.collections()
    points = 0
    for name in collections:
        info = await source.get_collection(name)
        params = info.config.params.vectors
        assert isinstance(params, models.VectorParams), f"collection {name!r} has named vectors"
        sparse = SPARSE_VECTOR in (info.config.params.sparse_vectors or {})
        await target.create(name, params.size, _DISTANCES[params.distance], _indexes(name), sparse=sparse)
        offset: str | None = None
        copied = 0
        while True:
            page, offset = await reader.scroll(name, limit=_PAGE, offset=offset, vectors=True)
            await target.upsert(name, [Point(r.id, r.vector or [], r.payload, r.sparse) for r in page])
            copied += len(page)
            if offset is None:
                break
        stored = await target.count(name)
        if stored != copied or stored != await reader.count(name):
            raise RuntimeError(f"collection {name!r}: copied {copied} points, the copy holds {stored}")
        points += copied
    aliases = (await source.get_aliases()).aliases
    for alias in aliases:
        await target.set_alias(alias.alias_name, alias.collection_name)
    return len(collections), points, len(aliases)


async def _migrate(legacy: Path, partial: Path) -> tuple[int, int, int]:
    source = AsyncQdrantClient(path=str(legacy))
    try:
        target = EdgeStore(partial)
        try:
            return await _copy(source, target)
        finally:
            await target.close()
    finally:
        await source.close()


def migrate_local_folder(legacy: Path, root: Path) -> Migration:
    """Copies the local-mode folder ``legacy`` into a Qdrant Edge folder ``root`` (see the module docstring).

    Runs on a thread of its own with its own event loop, so it can be called from synchronous code
    inside a running loop (``open_index``).

    Raises:
        RuntimeError: another process holds ``legacy``, or a copy came out short.
    """
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    outcome: list[tuple[int, int, int]] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(asyncio.run(_migrate(legacy, partial)))
        except BaseException as error:
            failure.append(error)

    log.warning("moving the knowledge store in %s from qdrant-client local mode to Qdrant Edge...", legacy)
    thread = threading.Thread(target=run, name="chamvi-migrate")
    thread.start()
    thread.join()
    if failure:
        shutil.rmtree(partial, ignore_errors=True)
        raise failure[0]
    partial.rename(root)
    backup = legacy.with_name(legacy.name + MIGRATED_SUFFIX)
    legacy.rename(backup)
    collections, points, aliases = outcome[0]
    log.warning(
        "moved %d collections (%d points, %d aliases) to Qdrant Edge in %s; the old folder is kept as %s "
        "(delete it once you are content)",
        collections,
        points,
        aliases,
        root,
        backup,
    )
    return Migration(collections, points, aliases, backup)
