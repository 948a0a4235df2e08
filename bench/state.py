"""What agent state costs, next to qdrant-client's raw calls on the same data; no Temporal involved.

Prints three measurements, each in qdrant-client's local mode in memory (``:memory:``) and on disk
(``path=``, the embedded default of ``chamvi dev``):

1. upsert throughput: ``ctx.state.collection(...).upsert`` (pydantic validation, the size check,
   one point) against ``AsyncQdrantClient.upsert`` of the same point, one write at a time;
2. list throughput: pages of 20 through ``collection.list`` against the raw ``query_points`` it makes,
   and against a raw ``scroll`` page, the obvious way to list a Qdrant collection;
3. list latency at 1 000 / 10 000 / 100 000 items: the first page and a page at offset 500 through
   ``collection.list``, a raw ``scroll`` page, and a ``scroll`` with a payload filter (one customer),
   p50 and p95.

Usage: ``python bench/state.py`` (about 3 minutes on 2 cores), ``python bench/state.py --quick``
(1 000 and 10 000 items only, under a minute).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import version

from _common import leave, ratio, table
from _server import machine, options
from pydantic import BaseModel
from qdrant_client import AsyncQdrantClient, models

from chamvi.state import AgentStateAccess, StateStore
from chamvi.state.store import EPOCH, state_point_id

# local mode warns past 20 000 points that it is not meant for large collections: that is measured here
warnings.filterwarnings("ignore", message="Local mode is not recommended", category=UserWarning)

AGENT = "bench"
PAGE = 20
CUSTOMERS = 100


class Refund(BaseModel):
    customer: str
    order_id: str
    amount: float


def _refund(i: int) -> Refund:
    return Refund(customer=f"c{i % CUSTOMERS}@example.com", order_id=f"A-{i}", amount=float(i % 500))


def _point(collection: str, i: int) -> models.PointStruct:
    """The point ``StateStore.put`` writes for item ``i``, built by hand for the raw side."""
    now = datetime.now(UTC)
    payload = {
        "key": f"A-{i}",
        "value": _refund(i).model_dump(mode="json"),
        "updated_at": now.isoformat(),
        "effect": None,
    }
    return models.PointStruct(
        id=state_point_id(AGENT, collection, f"A-{i}"),
        vector=[(now - EPOCH).total_seconds()],
        payload=payload,
    )


async def _timed(samples: int, operation: Callable[[int], Awaitable[object]]) -> list[float]:
    """Milliseconds of each of ``samples`` sequential calls."""
    times = []
    for i in range(samples):
        start = time.perf_counter()
        await operation(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


async def _alternating(
    samples: int, ours: Callable[[int], Awaitable[object]], raw: Callable[[int], Awaitable[object]]
) -> tuple[list[float], list[float]]:
    """Milliseconds of each call of ``ours`` and ``raw``, taken in turns after one warm-up call each,
    so that a machine busy with something else slows both sides alike."""
    await ours(-1)
    await raw(-1)
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(samples):
        for side, operation in zip(times, (ours, raw), strict=True):
            start = time.perf_counter()
            await operation(i)
            side.append((time.perf_counter() - start) * 1000)
    return times


def _p(times: list[float], q: float) -> float:
    return statistics.quantiles(times, n=100)[int(q) - 1] if len(times) > 1 else times[0]


_FOLDERS: list[str] = []
"""The folders this run made, removed when it ends."""


def _folder(fast: bool = False) -> str:
    """A fresh folder for local mode on disk; ``fast``: in memory-backed /dev/shm where there is one."""
    shm = "/dev/shm" if fast and os.path.isdir("/dev/shm") else None
    _FOLDERS.append(tempfile.mkdtemp(prefix="chamvi-bench-state-", dir=shm))
    return _FOLDERS[-1]


def _open(where: str) -> AsyncQdrantClient:
    if where == "memory":
        return AsyncQdrantClient(location=":memory:")
    return AsyncQdrantClient(path=_folder())


async def _fill(client: AsyncQdrantClient, store: StateStore, collection: str, start: int, end: int) -> None:
    """Items ``start`` to ``end`` in batches (the raw way: a fill is setup, not measured)."""
    name = store.qdrant_collection(AGENT, collection)
    if not await client.collection_exists(name):
        await client.create_collection(
            name, vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT)
        )
    for first in range(start, end, 1000):
        batch = range(first, min(first + 1000, end))
        await client.upsert(name, points=[_point(collection, i) for i in batch])


async def bench_writes(where: str, writes: int) -> list[object]:
    """Section 1: one validated upsert at a time against one raw upsert at a time."""
    client = _open(where)
    store = StateStore(client)
    refunds = AgentStateAccess(store, AGENT, {"refunds": Refund}).collection("refunds")
    await _fill(client, store, "raw", 0, 1)
    raw_name = store.qdrant_collection(AGENT, "raw")
    ours, raw = await _alternating(
        writes,
        lambda i: refunds.upsert(f"A-{i}", _refund(i)),
        lambda i: client.upsert(raw_name, points=[_point("raw", i)]),
    )
    await client.close()
    ours_rate, raw_rate = writes / (sum(ours) / 1000), writes / (sum(raw) / 1000)
    return [where, f"{ours_rate:,.0f}/s", f"{raw_rate:,.0f}/s", ratio(ours_rate, raw_rate)]


_ONE_CUSTOMER = models.Filter(
    must=[models.FieldCondition(key="value.customer", match=models.MatchValue(value="c7@example.com"))]
)


async def _measure(
    client: AsyncQdrantClient, label: str, pages: int, throughput: bool
) -> tuple[list[object], list[object]]:
    """One latency row, and (``throughput``) one throughput row, of the collection as it is now."""
    store = StateStore(client)
    refunds = AgentStateAccess(store, AGENT, {"refunds": Refund}).collection("refunds")
    name = store.qdrant_collection(AGENT, "refunds")
    first, raw_query = await _alternating(
        pages,
        lambda _: refunds.list(limit=PAGE),
        lambda _: client.query_points(name, query=[1.0], limit=PAGE + 1, with_payload=True),
    )
    deep = await _timed(pages, lambda _: refunds.list(limit=PAGE, offset=500))
    scroll = await _timed(max(3, pages // 4), lambda _: client.scroll(name, limit=PAGE))
    filtered = await _timed(
        max(3, pages // 10), lambda _: client.scroll(name, limit=PAGE, scroll_filter=_ONE_CUSTOMER)
    )
    row = [
        label,
        *(f"{_p(t, 50):.1f} / {_p(t, 95):.1f}" for t in (first, deep, scroll, filtered)),
        ratio(statistics.median(scroll), statistics.median(first)),
    ]
    if not throughput:
        return row, []
    rates = [pages / (sum(t) / 1000) for t in (first, raw_query, scroll)]
    return row, [*(f"{r:,.0f}/s" for r in rates), ratio(rates[0], rates[1]), ratio(rates[0], rates[2])]


async def bench_sizes(where: str, sizes: list[int], pages: int) -> tuple[list[list[object]], list[object]]:
    """Sections 2 and 3 on one growing collection: latency at each size, throughput at 10 000.

    On disk, each size is filled, then read by a new client that opens the folder, as a restarted
    worker would. The folder is in /dev/shm: filling it writes a SQLite transaction per point, which
    on this disk takes minutes per 100 000 points, and a listing never reads the file (local mode
    loads every point when it opens the folder).
    """
    folder = _folder(fast=True) if where == "disk" else None
    client = AsyncQdrantClient(path=folder) if folder else _open(where)
    rows: list[list[object]] = []
    throughput: list[object] = []
    filled = 0
    for size in sizes:
        await _fill(client, StateStore(client), "refunds", filled, size)
        filled = size
        if folder:
            await client.close()
            client = AsyncQdrantClient(path=folder)
        row, rates = await _measure(client, f"{where} {size:,}", pages, size == 10_000)
        rows.append(row)
        print(f"  measured {where} at {size:,} items", file=sys.stderr, flush=True)
        if rates:
            throughput = [where, *rates]
    await client.close()
    return rows, throughput


async def main(quick: bool) -> None:
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    writes, pages = (200, 20) if quick else (2_000, 60)
    print(f"bench/state.py: {machine()}, qdrant-client {version('qdrant-client')}, local mode", flush=True)
    print(f"\n1. upsert throughput, one write at a time ({writes:,} in memory, {writes // 4:,} on disk)")
    write_rows = [await bench_writes("memory", writes), await bench_writes("disk", writes // 4)]
    print(table(["store", "collection.upsert", "raw upsert", "ours / raw"], write_rows), flush=True)
    latency_rows: list[list[object]] = []
    throughput_rows: list[list[object]] = []
    for where in ("memory", "disk"):
        rows, throughput = await bench_sizes(where, sizes, pages)
        latency_rows.extend(rows)
        throughput_rows.append(throughput)
    print(f"\n2. list throughput at 10,000 items, pages of {PAGE} (sequential)")
    print(
        table(
            ["store", "collection.list", "raw query_points", "raw scroll", "ours / query", "ours / scroll"],
            throughput_rows,
        )
    )
    print(f"\n3. list latency, ms p50 / p95, pages of {PAGE}")
    print(
        table(
            ["store, items", "list", "list offset 500", "raw scroll", "scroll + filter", "scroll / list"],
            latency_rows,
        )
    )
    for folder in _FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)
    leave()


if __name__ == "__main__":
    parsed = options(__doc__, "1 000 and 10 000 items only, under a minute").parse_args()
    asyncio.run(main(parsed.quick))
    sys.exit(0)
