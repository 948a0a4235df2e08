"""One contract for the storage protocol, run on each implementation against the real engine.

* ``edge``: Qdrant Edge shards in a tmp folder (the embedded default);
* ``client-memory`` and ``client-path``: qdrant-client's local mode, in memory and on disk, the
  stand-in for a Qdrant server here (no Qdrant server binary installs from PyPI or Debian's
  packages on these machines); a server gets the same qdrant-client calls.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from chamvi.vectors import (
    CollectionNotFoundError,
    IsEmpty,
    Match,
    MatchAny,
    Point,
    SparseVector,
    StoreBusyError,
    VectorStore,
    Where,
)
from chamvi.vectors.client import ClientStore
from chamvi.vectors.edge import EdgeStore

Opener = Callable[[], VectorStore]


def _pid(n: int) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_OID, str(n)))


@pytest.fixture(params=["edge", "client-memory", "client-path"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    kind = request.param
    if kind == "edge":
        return lambda: EdgeStore(tmp_path / "edge")
    if kind == "client-memory":
        return lambda: ClientStore(AsyncQdrantClient(location=":memory:"))
    return lambda: ClientStore(AsyncQdrantClient(path=str(tmp_path / "local")))


@pytest.fixture
async def store(opener: Opener) -> AsyncIterator[VectorStore]:
    opened = opener()
    yield opened
    await opened.close()


def _points(n: int) -> list[Point]:
    return [
        Point(
            _pid(i),
            [1.0, float(i), 0.0],
            {"document": f"d{i % 5}", "index": i, "entry": {"trusted": i % 2 == 0} if i < 6 else None},
        )
        for i in range(n)
    ]


async def test_a_created_collection_exists_until_dropped(store: VectorStore) -> None:
    assert not await store.exists("chamvi_a_g1")
    await store.create("chamvi_a_g1", 3, "cosine", {"document": "keyword"})
    await store.create("chamvi_a_g1", 3, "cosine")  # again: no error, nothing lost
    await store.create("chamvi__meta", 1, "dot")
    assert await store.exists("chamvi_a_g1")
    assert await store.collections() == ["chamvi__meta", "chamvi_a_g1"]
    await store.drop("chamvi_a_g1")
    await store.drop("chamvi_a_g1")  # a missing one is no error
    assert await store.collections() == ["chamvi__meta"]


async def test_points_read_back_as_written_and_missing_ids_are_left_out(store: VectorStore) -> None:
    await store.create("c", 3, "cosine")
    await store.upsert("c", _points(8))
    found = await store.retrieve("c", [_pid(1), _pid(99), _pid(3)])
    assert sorted(r.id for r in found) == sorted([_pid(1), _pid(3)])
    one = next(r for r in found if r.id == _pid(1))
    assert one.payload == {"document": "d1", "index": 1, "entry": {"trusted": False}}
    (only,) = await store.retrieve("c", [_pid(2)], payload=["document"], vectors=True)
    assert only.payload == {"document": "d2"}
    assert only.vector is not None and len(only.vector) == 3
    await store.upsert("c", [Point(_pid(1), [0.0, 1.0, 0.0], {"document": "new"})])
    (replaced,) = await store.retrieve("c", [_pid(1)])
    assert replaced.payload == {"document": "new"}


async def test_filters_match_values_booleans_lists_and_empty_fields(store: VectorStore) -> None:
    await store.create("c", 3, "cosine", {"document": "keyword"})
    await store.upsert("c", _points(10))
    assert await store.count("c") == 10
    assert await store.count("c", Where(must=(Match("document", "d1"),))) == 2
    assert await store.count("c", Where(must=(MatchAny("document", ("d1", "d2")),))) == 4
    assert await store.count("c", Where(must=(Match("index", 3),))) == 1
    stamped = Where(must_not=(IsEmpty("entry"),))
    assert await store.count("c", stamped) == 6
    untrusted = Where(must=(Match("entry.trusted", False),), must_not=(IsEmpty("entry"),))
    assert await store.count("c", untrusted) == 3
    assert await store.count("c", Where(must=(Match("entry.trusted", True),))) == 3


async def test_deletes_by_id_and_by_filter_and_payload_edits(store: VectorStore) -> None:
    await store.create("c", 3, "cosine", {"document": "keyword"})
    await store.upsert("c", _points(10))
    await store.delete("c", [_pid(0), _pid(99)])
    await store.delete_where("c", Where(must=(MatchAny("document", ("d4",)),)))
    assert await store.count("c") == 7
    await store.set_payload("c", [_pid(1)], {"entry": {"id": "x"}})
    await store.delete_payload("c", [_pid(2)], ["entry"])
    one, two = sorted(await store.retrieve("c", [_pid(1), _pid(2)]), key=lambda r: r.payload["index"])
    assert one.payload["entry"] == {"id": "x"} and one.payload["document"] == "d1"
    assert "entry" not in two.payload and two.payload["document"] == "d2"
    await store.delete("missing", [_pid(1)])  # deleting from a missing collection is no error


async def test_a_scroll_pages_every_point_once_in_id_order(store: VectorStore) -> None:
    await store.create("c", 3, "cosine")
    await store.upsert("c", _points(25))
    seen: list[str] = []
    offset: str | None = None
    while True:
        page, offset = await store.scroll("c", limit=7, offset=offset, payload=False)
        seen.extend(r.id for r in page)
        assert all(r.payload == {} for r in page)
        if offset is None:
            break
    assert seen == sorted(_pid(i) for i in range(25))
    filtered, _ = await store.scroll("c", limit=100, where=Where(must=(Match("document", "d3"),)))
    assert sorted(r.payload["index"] for r in filtered) == [3, 8, 13, 18, 23]


async def test_a_search_ranks_nearest_first_with_offset_filter_and_exact(store: VectorStore) -> None:
    await store.create("c", 3, "cosine", {"document": "keyword"})
    await store.upsert(
        "c", [Point(_pid(i), [1.0, i / 10, 0.0], {"index": i, "document": f"d{i % 2}"}) for i in range(10)]
    )
    hits = await store.search("c", [1.0, 0.0, 0.0], limit=3)
    assert [h.payload["index"] for h in hits] == [0, 1, 2]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4) and hits[0].score > hits[1].score
    page = await store.search("c", [1.0, 0.0, 0.0], limit=2, offset=2, exact=True, payload=["index"])
    assert [h.payload for h in page] == [{"index": 2}, {"index": 3}]
    odd = await store.search("c", [1.0, 0.0, 0.0], limit=2, where=Where(must=(Match("document", "d1"),)))
    assert [h.payload["index"] for h in odd] == [1, 3]


def _term(*terms: int) -> SparseVector:
    return SparseVector(list(terms), [1.0] * len(terms))


async def _hybrid_collection(store: VectorStore) -> None:
    # point 0 is the dense nearest to [1, 0, 0]; only point 7 holds the rare term 42, and it is the
    # dense farthest; term 1 is in every point, so the IDF modifier weighs it near nothing
    await store.create("h", 3, "cosine", {"document": "keyword"}, sparse=True)
    await store.upsert(
        "h",
        [
            Point(
                _pid(i),
                [1.0, float(i), 0.0],
                {"document": f"d{i % 2}", "index": i},
                _term(1, 42) if i == 7 else _term(1),
            )
            for i in range(8)
        ],
    )


async def test_a_sparse_search_finds_the_one_point_holding_a_rare_term(store: VectorStore) -> None:
    await _hybrid_collection(store)
    found = await store.sparse_search("h", _term(42), limit=3)
    assert [s.payload["index"] for s in found] == [7]
    both = await store.sparse_search("h", _term(1, 42), limit=8)
    assert both[0].payload["index"] == 7 and both[0].score > both[1].score
    assert (
        await store.sparse_search("h", _term(42), limit=3, where=Where(must=(Match("document", "d0"),))) == []
    )


async def test_a_hybrid_search_puts_a_decisive_sparse_match_among_the_dense_ranking(
    store: VectorStore,
) -> None:
    await _hybrid_collection(store)
    dense = await store.search("h", [1.0, 0.0, 0.0], limit=3)
    assert [s.payload["index"] for s in dense] == [0, 1, 2]
    fused = await store.hybrid_search("h", [1.0, 0.0, 0.0], _term(42), limit=3)
    # BM25's best (the only point with term 42) leads its second by far: first, then the dense order
    assert [s.payload["index"] for s in fused] == [7, 0, 1]
    by_index = {s.payload["index"]: s.score for s in fused}
    assert by_index[0] == pytest.approx(1.0, abs=1e-4)  # scores are cosines, in the fused order
    assert by_index[7] == pytest.approx(1 / (1 + 49) ** 0.5, abs=1e-4)
    floor = await store.hybrid_search("h", [1.0, 0.0, 0.0], _term(42), limit=8, min_score=0.7)
    assert sorted(s.payload["index"] for s in floor) == [0, 1]  # a cosine floor, whichever side found it
    common = await store.hybrid_search("h", [1.0, 0.0, 0.0], _term(1), limit=3)
    assert [s.payload["index"] for s in common] == [0, 1, 2]  # a term every point holds: dense stands
    (record,) = await store.retrieve("h", [_pid(7)], vectors=True)
    assert record.vector is not None and len(record.vector) == 3
    assert record.sparse is not None and sorted(record.sparse.indices) == [1, 42]  # read back to copy it


async def test_a_dot_product_collection_ranks_by_the_largest_product(store: VectorStore) -> None:
    await store.create("s", 1, "dot")
    await store.upsert("s", [Point(_pid(i), [float(t)], {"key": f"k{i}"}) for i, t in enumerate([5, 50, 20])])
    hits = await store.search("s", [1.0], limit=3, exact=True)
    assert [h.payload["key"] for h in hits] == ["k1", "k2", "k0"]


def _stamp(microseconds: int) -> str:
    return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=microseconds)).isoformat()


async def test_an_ordered_page_follows_a_datetime_index_to_the_microsecond(store: VectorStore) -> None:
    await store.create("s", 1, "dot", {"at": "datetime"})
    order = [3, 1, 2, 5, 4, 0]  # written out of order, 300 microseconds apart
    await store.upsert(
        "s", [Point(_pid(n), [1.0], {"at": _stamp(n * 300), "n": n, "odd": n % 2 == 1}) for n in order]
    )
    page = await store.ordered("s", "at", limit=3, offset=1)
    assert [r.payload["n"] for r in page] == [4, 3, 2]
    oldest = await store.ordered("s", "at", limit=2, descending=False, payload=["n"])
    assert [r.payload for r in oldest] == [{"n": 0}, {"n": 1}]
    odd = await store.ordered("s", "at", limit=5, where=Where(must=(Match("odd", True),)))
    assert [r.payload["n"] for r in odd] == [5, 3, 1]


async def test_a_payload_index_added_to_a_filled_collection_orders_what_it_held(store: VectorStore) -> None:
    await store.create("s", 1, "dot")
    await store.upsert("s", [Point(_pid(n), [1.0], {"at": _stamp(n), "n": n}) for n in (2, 0, 1)])
    await store.index_payload("s", "at", "datetime")
    await store.index_payload("s", "at", "datetime")  # asked again: nothing to do
    assert [r.payload["n"] for r in await store.ordered("s", "at", limit=5)] == [2, 1, 0]


async def test_an_alias_switches_in_one_step_and_follows_no_dropped_collection(store: VectorStore) -> None:
    await store.create("c_g1", 3, "cosine")
    await store.create("c_g2", 3, "cosine")
    assert await store.alias("c") is None
    await store.set_alias("c", "c_g1")
    assert await store.alias("c") == "c_g1"
    await store.set_alias("c", "c_g2")
    assert await store.alias("c") == "c_g2"
    await store.drop("c_g1")
    assert await store.alias("c") == "c_g2"


async def test_reading_a_missing_collection_names_it(store: VectorStore) -> None:
    for call in (
        store.count("nope"),
        store.retrieve("nope", [_pid(1)]),
        store.scroll("nope", limit=1),
        store.search("nope", [1.0], limit=1),
        store.upsert("nope", [Point(_pid(1), [1.0], {})]),
    ):
        with pytest.raises(CollectionNotFoundError, match="nope"):
            await call


@pytest.mark.parametrize("kind", ["edge", "client-path"])
async def test_a_folder_keeps_everything_across_a_reopen_and_admits_one_store(
    tmp_path: Path, kind: str
) -> None:
    def opener() -> VectorStore:
        if kind == "edge":
            return EdgeStore(tmp_path / "store")
        return ClientStore(AsyncQdrantClient(path=str(tmp_path / "store")))

    first = opener()
    await first.create("c_g1", 3, "cosine", {"document": "keyword"})
    await first.upsert("c_g1", _points(10))
    await first.set_alias("c", "c_g1")
    await first.delete("c_g1", [_pid(0)])
    if kind == "edge":
        with pytest.raises(StoreBusyError):
            EdgeStore(tmp_path / "store")
    else:
        with pytest.raises(RuntimeError, match="already accessed"):
            AsyncQdrantClient(path=str(tmp_path / "store"))
    await first.close()
    again = opener()
    try:
        assert await again.count("c_g1") == 9
        assert await again.alias("c") == "c_g1"
        assert await again.count("c_g1", Where(must=(Match("document", "d1"),))) == 2
    finally:
        await again.close()
