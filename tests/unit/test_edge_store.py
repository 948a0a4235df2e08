"""Qdrant Edge's side of the store: the catalog, and the index built in a child process."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
import qdrant_edge as qe

from chamvi.errors import StoreDamagedError
from chamvi.vectors import Match, Point, Where
from chamvi.vectors.edge import CATALOG, EdgeStore


def _points(start: int, end: int, dimensions: int = 16) -> list[Point]:
    rng = np.random.default_rng(start)
    vectors = rng.standard_normal((end - start, dimensions)).astype(np.float32)
    return [
        Point(str(uuid.uuid5(uuid.NAMESPACE_OID, str(i))), vectors[i - start].tolist(), {"index": i})
        for i in range(start, end)
    ]


async def building(root: Path, points: int, threshold: int = 100) -> EdgeStore:
    """A store whose collection ``c`` holds ``points`` points and has asked for its index."""
    store = EdgeStore(root, index_threshold=threshold)
    await store.create("c", 16, "cosine")
    await store.upsert("c", _points(0, points))
    await store.optimize("c")
    return store


async def test_the_index_is_built_on_a_copy_and_writes_made_meanwhile_are_kept(tmp_path: Path) -> None:
    store = await building(tmp_path / "edge", 3000)
    # while the child process builds the index: writes and searches go on here
    later = _points(3000, 3100)
    await store.upsert("c", later)
    await store.delete("c", [p.id for p in _points(0, 10)])
    assert len(await store.search("c", [1.0] * 16, limit=5)) == 5
    await store.optimized()
    catalog = json.loads((tmp_path / "edge" / CATALOG).read_text())
    assert catalog["collections"]["c"] == 1
    assert [p.name for p in (tmp_path / "edge" / "collections" / "c").iterdir()] == ["shard-1"]
    assert await store.count("c") == 3090
    probe = later[50]
    (best,) = await store.search("c", probe.vector, limit=1)
    assert best.id == probe.id
    await store.close()
    again = EdgeStore(tmp_path / "edge")
    assert await again.count("c") == 3090
    await again.close()


async def test_a_small_collection_is_left_to_brute_force(tmp_path: Path) -> None:
    store = await building(tmp_path / "edge", 200, threshold=1000)
    await store.optimized()
    assert json.loads((tmp_path / "edge" / CATALOG).read_text())["collections"]["c"] == 0
    await store.close()


async def test_dropping_a_collection_mid_build_stops_it_and_leaves_no_folder(tmp_path: Path) -> None:
    store = await building(tmp_path / "edge", 3000)
    await asyncio.sleep(0.05)
    await store.drop("c")
    await store.optimized()
    assert not await store.exists("c")
    assert list((tmp_path / "edge" / "collections").iterdir()) == []
    await store.close()


async def test_closing_mid_build_keeps_the_shard_as_it_was_and_removes_the_copy(tmp_path: Path) -> None:
    store = await building(tmp_path / "edge", 3000)
    await asyncio.sleep(0.05)
    await store.upsert("c", _points(3000, 3010))
    await store.close()
    again = EdgeStore(tmp_path / "edge")
    assert await again.count("c") == 3010
    assert [p.name for p in (tmp_path / "edge" / "collections" / "c").iterdir()] == ["shard-0"]
    await again.close()


async def test_leftover_folders_of_an_interrupted_create_are_removed_on_open(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "edge")
    await store.create("c", 4, "cosine")
    await store.close()
    (tmp_path / "edge" / "collections" / "ghost" / "shard-0").mkdir(parents=True)
    (tmp_path / "edge" / "collections" / "c" / "shard-7").mkdir()
    again = EdgeStore(tmp_path / "edge")
    assert sorted(p.name for p in (tmp_path / "edge" / "collections").iterdir()) == ["c"]
    assert [p.name for p in (tmp_path / "edge" / "collections" / "c").iterdir()] == ["shard-0"]
    await again.close()


async def test_a_search_of_an_indexed_collection_answers_the_exact_cosine_of_each_point(
    tmp_path: Path,
) -> None:
    # large enough for Edge to search the index's int8 copies rather than scan the originals
    points = _points(0, 12_000, dimensions=384)
    store = EdgeStore(tmp_path / "edge", index_threshold=100)
    await store.create("c", 384, "cosine", {"index": "integer"})
    for start in range(0, len(points), 1000):
        await store.upsert("c", points[start : start + 1000])
    await store.optimize("c")
    await store.optimized()
    stored = {p.id: np.array(p.vector) for p in points}
    query = np.array(_points(90_000, 90_001, dimensions=384)[0].vector)
    hits = await store.search("c", query.tolist(), limit=5)
    assert len(hits) == 5
    for hit in hits:  # rescored with the original vectors, not the int8 copies the index searched
        vector = stored[hit.id]
        cosine = float(vector @ query / (np.linalg.norm(vector) * np.linalg.norm(query)))
        assert abs(hit.score - cosine) < 1e-5
    await store.close()
    # the payload index of the indexed segment is read from disk (Memory.Cold), in a fresh open too
    again = EdgeStore(tmp_path / "edge")
    assert await again.count("c", Where(must=(Match("index", 11_999),))) == 1
    top = await again.ordered("c", "index", limit=3)
    assert [r.payload["index"] for r in top] == [11_999, 11_998, 11_997]
    await again.close()


async def test_a_folder_whose_int8_copies_were_kept_in_ram_opens_and_serves_as_before(tmp_path: Path) -> None:
    # the layout written before the int8 copies stayed on disk (Memory.Pinned): its segments keep
    # their own placement, so the folder opens, searches and takes writes as it is
    pinned = qe.EdgeVectorParams(
        size=16,
        distance=qe.Distance.Cosine,
        memory=qe.Memory.Cold,
        quantization_config=qe.ScalarQuantizationConfig(
            qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned
        ),
    )
    folder = tmp_path / "edge" / "collections" / "c" / "shard-0"
    config = qe.EdgeConfig(vectors=pinned, optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1))
    shard = qe.EdgeShard.create(str(folder), config)
    points = _points(0, 2000)
    shard.update(
        qe.UpdateOperation.upsert_points([qe.Point(p.id, list(p.vector), dict(p.payload)) for p in points])
    )
    shard.optimize()
    shard.close()
    (tmp_path / "edge" / CATALOG).write_text(json.dumps({"collections": {"c": 0}, "aliases": {"a": "c"}}))
    assert '"pinned"' in next(folder.glob("segments/*/vector_storage/quantized.config.json")).read_text()
    store = EdgeStore(tmp_path / "edge")
    await store.open_all()
    probe = points[1234]
    (best,) = await store.search("c", probe.vector, limit=1)
    assert best.id == probe.id
    await store.upsert("c", _points(5000, 5001))
    assert await store.count("c") == 2001
    await store.close()


def _schema(store: EdgeStore, name: str) -> list[str]:
    return list(store._get(name).shard.info().payload_schema)


async def test_a_keyword_index_is_made_by_the_first_index_build_and_its_filter_matches_throughout(
    tmp_path: Path,
) -> None:
    store = EdgeStore(tmp_path / "edge", index_threshold=100)
    await store.create("c", 16, "cosine", {"document": "keyword", "index": "integer"})
    points = [
        Point(p.id, p.vector, {**p.payload, "document": f"d{i % 300}"})
        for i, p in enumerate(_points(0, 3000))
    ]
    await store.upsert("c", points)
    # the segment taking writes holds no map of every document: filters on it scan payloads
    assert _schema(store, "c") == ["index"]
    assert json.loads((tmp_path / "edge" / CATALOG).read_text())["deferred_indexes"] == {
        "c": {"document": "keyword"}
    }
    await store.index_payload("c", "document", "keyword")  # already asked for: left to the build
    assert _schema(store, "c") == ["index"]
    await store.delete_where("c", Where(must=(Match("document", "d1"),)))
    assert await store.count("c") == 2990
    await store.optimize("c")
    await store.optimized()
    assert sorted(_schema(store, "c")) == ["document", "index"]
    assert "deferred_indexes" not in json.loads((tmp_path / "edge" / CATALOG).read_text())
    assert await store.count("c", Where(must=(Match("document", "d2"),))) == 10
    await store.close()
    again = EdgeStore(tmp_path / "edge")
    await again.upsert("c", [Point(p.id, p.vector, {"document": "late"}) for p in _points(5000, 5005)])
    assert await again.count("c", Where(must=(Match("document", "late"),))) == 5
    await again.delete_where("c", Where(must=(Match("document", "d2"),)))
    assert await again.count("c") == 2985
    assert sorted(_schema(again, "c")) == ["document", "index"]
    await again.close()


async def test_a_deferred_index_outlives_a_build_cut_short_and_is_forgotten_with_its_collection(
    tmp_path: Path,
) -> None:
    store = EdgeStore(tmp_path / "edge", index_threshold=100)
    await store.create("c", 16, "cosine", {"document": "keyword"})
    await store.create("d", 16, "cosine", {"document": "keyword"})
    await store.upsert("c", [Point(p.id, p.vector, {"document": "x"}) for p in _points(0, 3000)])
    await store.optimize("c")
    await asyncio.sleep(0.05)
    await store.close()  # mid-build, as a stopped worker: the copy goes, the promise stays
    catalog = json.loads((tmp_path / "edge" / CATALOG).read_text())
    assert catalog["collections"]["c"] == 0
    assert set(catalog["deferred_indexes"]) == {"c", "d"}
    store = EdgeStore(tmp_path / "edge", index_threshold=100)
    await store.optimize("c")
    await store.optimized()
    assert _schema(store, "c") == ["document"]
    await store.drop("d")
    await store.close()
    assert "deferred_indexes" not in json.loads((tmp_path / "edge" / CATALOG).read_text())


_WORKER = """
import asyncio, sys, uuid
import numpy as np
from chamvi.vectors import Point
from chamvi.vectors.edge import EdgeStore

async def main():
    store = EdgeStore(sys.argv[1], index_threshold=100)
    await store.create("c", 64, "cosine")
    vectors = np.random.default_rng(0).standard_normal((60_000, 64)).astype(np.float32).tolist()
    for start in range(0, 60_000, 2_000):
        points = [Point(str(uuid.UUID(int=i + 1)), vectors[i], {}) for i in range(start, start + 2_000)]
        await store.upsert("c", points)
    await store.optimize("c")
    await asyncio.sleep(3600)

asyncio.run(main())
"""
"""A worker that fills a collection, asks for its index and waits."""


def _builders(folder: Path) -> list[int]:
    """The pids of live index builds working in ``folder`` (a zombie is not one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"chamvi.vectors._optimize" in argv and str(folder).encode() in b" ".join(argv) and state != "Z":
            found.append(int(entry.name))
    return found


def _loaded(pid: int) -> bool:
    """Whether the build has the copy of the shard open (so it is past arming its parent-death signal)."""
    try:
        return "/shard-1/" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
async def test_an_index_build_dies_with_the_worker_killed_mid_build(tmp_path: Path) -> None:
    folder = tmp_path / "edge"
    worker = subprocess.Popen([sys.executable, "-c", _WORKER, str(folder)])
    builders: list[int] = []
    try:
        for _ in range(1200):
            builders = [pid for pid in _builders(folder) if _loaded(pid)]
            if builders or worker.poll() is not None:
                break
            await asyncio.sleep(0.02)
        assert builders, "the worker started no index build"
        os.kill(builders[0], signal.SIGSTOP)  # stopped, it cannot end on its own: only a signal kills it
        worker.kill()
        worker.wait()
        for _ in range(500):
            if not _builders(folder):
                break
            await asyncio.sleep(0.02)
        assert _builders(folder) == []
    finally:
        worker.kill()
        for pid in _builders(folder):
            os.kill(pid, signal.SIGKILL)
    again = EdgeStore(folder)  # the next worker: the build's copy is a leftover and goes
    assert [p.name for p in (folder / "collections" / "c").iterdir()] == ["shard-0"]
    assert await again.count("c") == 60_000
    await again.close()


@pytest.mark.parametrize(
    ("file", "size", "problem"),
    [
        # Edge loads it and fails at the first search ("vector 15 is not readable")
        ("vector_storage/vectors/chunk_0.mmap", 1000, "chunk_0.mmap is 1000 bytes where its config.json"),
        # Edge panics while loading it (pyo3's PanicException is no Exception: it ended the worker)
        ("vector_storage/vectors/status.dat", 0, "Qdrant Edge cannot load it (PanicException"),
    ],
)
async def test_a_shard_cut_short_on_disk_is_named_with_how_to_rebuild_it_and_the_rest_is_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, file: str, size: int, problem: str
) -> None:
    store = EdgeStore(tmp_path / "edge")
    for name in ("chamvi_handbook_g1", "chamvi_releases_g1"):
        await store.create(name, 16, "cosine")
        await store.upsert(name, _points(0, 50))
    await store.close()
    folder = tmp_path / "edge" / "collections" / "chamvi_handbook_g1"
    (damaged,) = folder.glob(f"shard-0/segments/*/{file}")
    os.truncate(damaged, size)

    again = EdgeStore(tmp_path / "edge")
    with caplog.at_level(logging.ERROR, logger="chamvi.vectors"):
        await again.open_all()
    assert len(await again.search("chamvi_releases_g1", [1.0] * 16, limit=3)) == 3
    with pytest.raises(StoreDamagedError) as raised:
        await again.search("chamvi_handbook_g1", [1.0] * 16, limit=3)
    message = str(raised.value)
    assert raised.value.code == "store_damaged"
    assert message.startswith("collection 'chamvi_handbook_g1' of the Qdrant Edge store is damaged: ")
    assert problem in message
    assert f"in its shard {folder / 'shard-0'}" in message
    assert f"stop the worker, delete the folder {folder} and start the worker again" in message
    assert "`chamvi knowledge sync <collection>`" in message
    assert [r.getMessage() for r in caplog.records if r.name == "chamvi.vectors.edge"] == [message]
    await again.close()


async def test_a_collection_whose_folder_was_deleted_is_forgotten_on_open(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "edge")
    await store.create("c", 16, "cosine")
    await store.create("kept", 16, "cosine")
    await store.set_alias("a", "c")
    await store.close()
    shutil.rmtree(tmp_path / "edge" / "collections" / "c")
    again = EdgeStore(tmp_path / "edge")
    await again.open_all()
    assert await again.collections() == ["kept"]
    assert await again.alias("a") is None
    await again.create("c", 16, "cosine")
    assert await again.count("c") == 0
    await again.close()
