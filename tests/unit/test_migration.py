"""A data folder that local mode wrote is carried over to Qdrant Edge on first start, losing nothing.

Two folders: ``tests/fixtures/local-mode-data.tar.gz``, written by the current release (main at
f52216c), the last that uses local mode, and one this checkout's local-mode path writes now
(``make_local_mode_data.write``).
"""

from __future__ import annotations

import asyncio
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient

from chamvi._lifecycle import EDGE_FOLDER, LOCAL_MODE_FOLDER, open_index
from chamvi.knowledge import folder, knowledge_collection
from chamvi.knowledge.indexing import Indexer
from chamvi.settings import Settings
from chamvi.state import StateStore
from chamvi.vectors import VectorStore
from chamvi.vectors.client import ClientStore
from chamvi.vectors.edge import EdgeStore
from tests.fixtures import make_local_mode_data

FIXTURE = Path(__file__).parent.parent / "fixtures" / "local-mode-data.tar.gz"


def _from_release(data: Path) -> None:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(data, filter="data")


def _from_this_checkout(data: Path) -> None:
    thread = threading.Thread(target=lambda: asyncio.run(make_local_mode_data.write(data)))
    thread.start()
    thread.join(60)


async def _everything(store: VectorStore) -> dict[str, dict[str, tuple[dict[str, Any], list[float]]]]:
    """Every point of every collection: payload and vector by id."""
    found: dict[str, dict[str, tuple[dict[str, Any], list[float]]]] = {}
    for name in await store.collections():
        points: dict[str, tuple[dict[str, Any], list[float]]] = {}
        offset: str | None = None
        while True:
            page, offset = await store.scroll(name, limit=100, offset=offset, vectors=True)
            # as float32, which Qdrant stores (local mode keeps the floats it was given)
            points.update(
                (r.id, (r.payload, np.array(r.vector or [], dtype=np.float32).round(5).tolist()))
                for r in page
            )
            if offset is None:
                break
        found[name] = points
    return found


@pytest.mark.parametrize("written_by", [_from_release, _from_this_checkout], ids=["release", "checkout"])
async def test_a_local_mode_folder_is_carried_over_with_every_point_alias_document_and_state_item(
    tmp_path: Path, written_by: Callable[[Path], None]
) -> None:
    written_by(tmp_path)
    local = ClientStore(AsyncQdrantClient(path=str(tmp_path / LOCAL_MODE_FOLDER)))
    before = await _everything(local)
    alias_before = await local.alias("chamvi_handbook")
    await local.close()

    index = open_index(Settings(data=tmp_path))
    try:
        assert isinstance(index.vectors, EdgeStore)
        assert await _everything(index.vectors) == before
        assert (
            alias_before == "chamvi_handbook_g2"
            and await index.vectors.alias("chamvi_handbook") == alias_before
        )

        handbook = await index.meta("handbook")
        assert handbook is not None and (handbook.generation, handbook.model) == (2, "test/hash-48")
        assert sorted(e.id for e in [e async for e in index.entries("handbook")]) == [
            "refunds.md",
            "shipping.md",
            "team/contacts.md",
        ]
        tickets = {e.id: e for e in [e async for e in index.entries("tickets")]}
        assert (tickets["T-1"].status, tickets["T-2"].status) == ("ready", "pending")
        assert tickets["T-2"].content == make_local_mode_data.TICKETS["T-2"]

        state = StateStore(index.vectors)
        greeting = await state.get("support", None, "greeting")
        assert greeting is not None and greeting.value == "hello"
        page = await state.page("support", "refunds", limit=10)
        assert sorted(i.key for i in page.items) == ["A-1", "A-2", "A-3"]
        assert await state.written_by("support", "refunds", "A-2") == "e-A-2"

        # the registry came along: a pass over the same files embeds nothing, the managed one only T-2
        indexer = Indexer(index, make_local_mode_data.registry())
        collection = knowledge_collection(
            "handbook", model="test/hash-48", sources=[folder(tmp_path / "handbook")]
        )
        after = await indexer.run_pass(collection)
        assert after.last_stats is not None and after.last_stats.embedded == 0 and after.documents == 3
        managed = await indexer.run_managed_pass("tickets")
        assert managed is not None and managed.last_stats is not None and managed.last_stats.embedded == 1
        hits = await index.search(
            "handbook",
            2,
            (await make_local_mode_data.registry().resolve("test/hash-48").embed(["refunds"]))[0],
            3,
        )
        assert hits and hits[0].document == "refunds.md"
    finally:
        await index.vectors.close()

    assert not (tmp_path / LOCAL_MODE_FOLDER).exists()
    assert (tmp_path / f"{LOCAL_MODE_FOLDER}.migrated" / "meta.json").is_file()
    again = open_index(Settings(data=tmp_path))  # no second migration: the Edge folder is the store
    try:
        assert (await again.meta("handbook")) is not None
    finally:
        await again.vectors.close()


async def test_a_migration_cut_short_leaves_the_local_mode_folder_and_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _from_release(tmp_path)

    async def broken(*_: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(EdgeStore, "upsert", broken)
    with pytest.raises(Exception, match="disk full"):
        open_index(Settings(data=tmp_path))
    assert (tmp_path / LOCAL_MODE_FOLDER / "meta.json").is_file()
    assert not (tmp_path / EDGE_FOLDER).exists()
    monkeypatch.undo()
    index = open_index(Settings(data=tmp_path))
    try:
        assert await index.vectors.count("chamvi_handbook_g2") > 0
    finally:
        await index.vectors.close()
