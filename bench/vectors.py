"""The embedded default at scale: Qdrant Edge beside qdrant-client's local mode, measured in one run.

1. Each store in a child process of its own (so its memory is its own), on disk in a temporary folder:
   upsert N generated passages (384-dimension unit vectors, a payload of 400 characters) through the
   storage protocol in batches of 64 (a pass's writes); build the search index (Edge: in its child
   process, as a worker does); search p50 / p95 over 200 queries; close, reopen and time the first
   search; the process's peak memory. Ratios are Edge against local mode of this run.
2. Parallel embedding: a first index of 15 000 passages through ``Indexer.run_pass`` against a
   loopback OpenAI-compatible server answering each call in 200 ms, one call at a time and 4 at once.

    python bench/vectors.py                    # 100 000 passages, both stores; then section 2
    python bench/vectors.py --points 1000000   # Edge alone at 1 000 000 (local mode would take hours)
    python bench/vectors.py --embedding-only   # section 2 alone (--stores-only: section 1 alone)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from _common import ratio, table
from qdrant_client import AsyncQdrantClient

from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.embedders import EmbeddingRegistry, HashEmbedder, OpenAIEmbeddingProvider
from chamvi.knowledge.indexing import Indexer
from chamvi.lifecycle import memory_index
from chamvi.vectors import Point, VectorStore
from chamvi.vectors.client import ClientStore
from chamvi.vectors.edge import EdgeStore

DIMENSIONS = 384
BATCH = 64
QUERIES = 200
COLLECTION = "chamvi_bench_g1"


def _vectors(start: int, end: int) -> np.ndarray:
    rng = np.random.default_rng(start)
    raw = rng.standard_normal((end - start, DIMENSIONS)).astype(np.float32)
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def _open(kind: str, folder: Path) -> VectorStore:
    if kind == "edge":
        return EdgeStore(folder)
    return ClientStore(AsyncQdrantClient(path=str(folder)))


async def _one(kind: str, points: int, folder: Path) -> dict[str, Any]:
    import uuid
    import warnings

    warnings.simplefilter("ignore")  # local mode warns past 20 000 points
    store = _open(kind, folder)
    await store.create(COLLECTION, DIMENSIONS, "cosine", {"document": "keyword"})
    text = "x" * 400
    started = time.perf_counter()
    for start in range(0, points, 8192):
        end = min(points, start + 8192)
        vectors = _vectors(start, end)
        for at in range(start, end, BATCH):
            batch = [
                Point(
                    str(uuid.UUID(int=i + 1)),
                    vectors[i - start].tolist(),
                    {"document": f"d{i}", "index": 0, "text": text},
                )
                for i in range(at, min(end, at + BATCH))
            ]
            await store.upsert(COLLECTION, batch)
    upsert = time.perf_counter() - started
    started = time.perf_counter()
    await store.optimize(COLLECTION)
    if isinstance(store, EdgeStore):
        await store.optimized()
    index = time.perf_counter() - started
    queries = _vectors(10**9, 10**9 + QUERIES)
    latencies = []
    for q in queries:
        t = time.perf_counter()
        await store.search(COLLECTION, q.tolist(), limit=5)
        latencies.append((time.perf_counter() - t) * 1000)
    await store.close()
    started = time.perf_counter()
    again = _open(kind, folder)
    await again.search(COLLECTION, queries[0].tolist(), limit=5)
    reopen = time.perf_counter() - started
    await again.close()
    return {
        "upsert_rate": points / upsert,
        "index_s": index,
        "p50_ms": statistics.median(latencies),
        "p95_ms": sorted(latencies)[int(len(latencies) * 0.95)],
        "reopen_s": reopen,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _child(kind: str, points: int) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"chamvi-bench-{kind}-"))
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--one", kind, "--points", str(points), "--folder", str(folder)],
            capture_output=True,
            text=True,
            check=True,
        )
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bench_stores(points: int, local: bool) -> None:
    kinds = ["edge", "local"] if local else ["edge"]
    results = {kind: _child(kind, points) for kind in kinds}
    rows = []
    for kind, label in (("edge", "Qdrant Edge (the default)"), ("local", "local mode (before)")):
        if kind not in results:
            continue
        r = results[kind]
        rows.append(
            [label, r["upsert_rate"], r["index_s"], r["p50_ms"], r["p95_ms"], r["reopen_s"], r["rss_mb"]]
        )
    if local:
        e, lo = results["edge"], results["local"]
        rows.append(
            [
                "Edge vs local mode",
                ratio(e["upsert_rate"], lo["upsert_rate"]),
                None,
                ratio(lo["p50_ms"], e["p50_ms"]),
                ratio(lo["p95_ms"], e["p95_ms"]),
                ratio(lo["reopen_s"], e["reopen_s"]),
                None,
            ]
        )
    print(
        f"\n1. {points:,} passages ({DIMENSIONS} dimensions, 400-character payloads), on disk, a process each"
    )
    headers = ["store", "upsert/s", "index s", "search p50 ms", "p95 ms", "reopen+search s", "peak MB"]
    print(table(headers, rows))
    print(
        "  index s: Edge builds HNSW in a child process on a copy while the store serves searches; local\n"
        "  mode has none. Ratios: faster is above 1.00x, both measured in this run. peak MB: the process's\n"
        "  peak resident memory (the index builder's child not included)."
    )


class _Slow(BaseHTTPRequestHandler):
    delay = 0.2
    embedder = HashEmbedder(64)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        time.sleep(self.delay)
        data = [
            {"index": i, "embedding": self.embedder.vector(t), "object": "embedding"}
            for i, t in enumerate(body["input"])
        ]
        payload = json.dumps(
            {"data": data, "model": "m", "object": "list", "usage": {"prompt_tokens": 0, "total_tokens": 0}}
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_: object) -> None:
        pass


async def bench_embedding(passages: int) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    registry = EmbeddingRegistry()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    registry.register("openai/m", OpenAIEmbeddingProvider(api_key="k", base_url=base).embedder("m"))

    async def documents() -> AsyncIterator[dict[str, str]]:
        for i in range(passages):
            yield {"id": f"doc-{i}", "content": f"passage {i} about refunds, shipping and invoices"}

    rows = []
    seconds = {}
    for concurrency in (1, 4):
        index = memory_index()
        collection = knowledge_collection(
            "bench",
            model="openai/m",
            sources=[define_source(documents=documents)],
            embedding_concurrency=concurrency,
        )
        started = time.perf_counter()
        meta = await Indexer(index, registry).run_pass(collection)
        seconds[concurrency] = time.perf_counter() - started
        assert meta.last_stats is not None and meta.passages == passages
        rows.append(
            [
                f"{concurrency} call(s) in flight",
                seconds[concurrency],
                meta.last_stats.embedding_calls,
                ratio(seconds[1], seconds[concurrency]),
            ]
        )
        await index.vectors.close()
    server.shutdown()
    print(
        f"\n2. First index of {passages:,} passages (Qdrant Edge), a loopback embedder answering in 200 ms"
    )
    print(table(["pass", "s", "embedding calls", "speed-up (same run)"], rows))
    print("  target: 4 in flight >= 3.50x one at a time.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--one")
    parser.add_argument("--folder")
    parser.add_argument("--embedding-only", action="store_true")
    parser.add_argument("--stores-only", action="store_true")
    parser.add_argument("--passages", type=int, default=15_000)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(_one(args.one, args.points, Path(args.folder)))))
        return
    if not args.embedding_only:
        bench_stores(args.points, local=args.points <= 200_000)
    if not args.stores_only:
        asyncio.run(bench_embedding(args.passages))


if __name__ == "__main__":
    main()
