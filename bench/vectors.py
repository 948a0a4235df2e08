"""The embedded default at scale: Qdrant Edge beside qdrant-client's local mode, measured in one run.

1. Each store in a child process of its own (so its memory is its own), on disk in a temporary folder:
   upsert N generated passages (384-dimension unit vectors, a payload of 400 characters) through the
   storage protocol in batches of 64 (a pass's writes); build the search index (Edge: in its child
   process, as a worker does); search p50 / p95 over 200 queries; the process's peak memory. Then a
   fresh process opens the folder again (a restarted worker): its open and first search, 200 more
   searches, its memory (all of it, and the heap without mapped files' pages). Ratios are Edge
   against local mode of this run.
2. Parallel embedding: a first index of 15 000 passages through ``Indexer.run_pass`` against a
   loopback OpenAI-compatible server answering each call in 200 ms, one call at a time and 4 at once.

    python bench/vectors.py                    # 100 000 passages, both stores; then section 2
    python bench/vectors.py --points 1000000   # Edge alone at 1 000 000 (local mode would take hours)
    python bench/vectors.py --embedding-only   # section 2 alone (--stores-only: section 1 alone)
    python bench/vectors.py --points 250000 --memory-limit 1536 --unlimited-too   # section 3

3. Under a memory limit (``--memory-limit MB``, Edge alone, instead of 1 and 2): the writer, Edge's
   index builder (moved out of the writer's group as soon as it starts) and the reopening workers
   each in a fresh cgroup with that limit and no swap, as a container runtime would; per process,
   whether it completed or was OOM-killed, the group's peak charge and failcnt (times it hit the
   limit), the sampled peaks of anon pages and page cache, its time and the search p50 it measured.
   ``--unlimited-too`` runs every step first in groups without a limit, for the times beside;
   ``--together`` leaves the builder in the writer's group, one limit for both as in a container.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
from _cgroup import MemoryGroup, Usage, controller
from _common import ratio, table
from qdrant_client import AsyncQdrantClient

from chamvi._lifecycle import memory_index
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.embedders import EmbeddingRegistry, HashEmbedder, OpenAIEmbeddingProvider
from chamvi.knowledge.indexing import Indexer
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


def _memory() -> dict[str, float]:
    """This process's resident memory in MB: all of it, its heap (anon), its mapped files' pages."""
    fields = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) / 1024
    fields["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return fields


async def _latencies(store: VectorStore, queries: np.ndarray) -> list[float]:
    latencies = []
    for q in queries:
        t = time.perf_counter()
        await store.search(COLLECTION, q.tolist(), limit=5)
        latencies.append((time.perf_counter() - t) * 1000)
    return latencies


async def _write(kind: str, points: int, folder: Path) -> dict[str, Any]:
    """The worker that indexes: upsert, build the index, search."""
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
    latencies = await _latencies(store, _vectors(10**9, 10**9 + QUERIES))
    memory = _memory()  # the store still open
    await store.close()
    return {
        "upsert_rate": points / upsert,
        "index_s": index,
        "p50_ms": statistics.median(latencies),
        "p95_ms": sorted(latencies)[int(len(latencies) * 0.95)],
        "memory": memory,
        "builder_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _page_cache(folder: Path, warm: bool) -> None:
    """Puts the folder's files in the page cache (warm: read through) or out of it (cold), file by file.

    Edge drops its own pages when it closes a shard, so a reopen right after a close reads from disk
    what a worker restarted later would (cold); warm is the folder as a copy just made leaves it.
    """
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        with open(path, "rb") as file:
            if warm:
                while file.read(1 << 20):
                    pass
            else:
                os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


class _Ticker:
    """A thread that wakes every 10 ms: its longest gap is how long a call held the GIL."""

    def __init__(self) -> None:
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        last = time.perf_counter()
        while not self._stop.wait(0.01):
            now = time.perf_counter()
            self.longest = max(self.longest, now - last)
            last = now

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.longest


def _read_bytes() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("read_bytes"))


async def _reopen(kind: str, folder: Path, cache: str) -> dict[str, Any]:
    """A worker started again on the folder: open and first search, then searches as before."""
    _page_cache(folder, warm=cache == "warm")
    queries = _vectors(2 * 10**9, 2 * 10**9 + QUERIES)
    ticker = _Ticker()
    read = _read_bytes()
    started = time.perf_counter()
    store = _open(kind, folder)
    await store.open_all()
    await store.search(COLLECTION, queries[0].tolist(), limit=5)
    reopen = time.perf_counter() - started
    read_mb = (_read_bytes() - read) / 2**20
    stalled = ticker.stop()
    latencies = await _latencies(store, queries)
    memory = _memory()  # the store still open: a running worker's memory
    await store.close()
    return {
        "reopen_s": reopen,
        "read_mb": read_mb,
        "stalled_s": stalled,
        "p50_ms": statistics.median(latencies),
        "memory": memory,
    }


def _child(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _measure(kind: str, points: int, keep: bool) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix=f"chamvi-bench-{kind}-"))
    try:
        written = _child("--one", kind, "--points", str(points), "--folder", str(folder))
        cold = _child("--reopen", kind, "--folder", str(folder), "--cache", "cold")
        warm = _child("--reopen", kind, "--folder", str(folder), "--cache", "warm")
        return {"write": written, "reopen": cold, "warm": warm}
    finally:
        if keep:
            print(f"  kept {kind}'s folder: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def bench_stores(points: int, local: bool, keep: bool = False) -> None:
    kinds = ["edge", "local"] if local else ["edge"]
    results = {kind: _measure(kind, points, keep) for kind in kinds}
    labels = {"edge": "Qdrant Edge (the default)", "local": "local mode (before)"}
    rows = []
    for kind in kinds:
        w, r, warm = results[kind]["write"], results[kind]["reopen"], results[kind]["warm"]
        rows.append(
            [
                labels[kind],
                w["upsert_rate"],
                w["index_s"],
                w["p50_ms"],
                w["p95_ms"],
                r["reopen_s"],
                warm["reopen_s"],
                r["stalled_s"],
                r["read_mb"],
                r["p50_ms"],
            ]
        )
    if local:
        e, lo = results["edge"], results["local"]
        rows.append(
            [
                "Edge vs local mode",
                ratio(e["write"]["upsert_rate"], lo["write"]["upsert_rate"]),
                None,
                ratio(lo["write"]["p50_ms"], e["write"]["p50_ms"]),
                ratio(lo["write"]["p95_ms"], e["write"]["p95_ms"]),
                ratio(lo["reopen"]["reopen_s"], e["reopen"]["reopen_s"]),
                ratio(lo["warm"]["reopen_s"], e["warm"]["reopen_s"]),
                None,
                None,
                ratio(lo["reopen"]["p50_ms"], e["reopen"]["p50_ms"]),
            ]
        )
    print(
        f"\n1. {points:,} passages ({DIMENSIONS} dimensions, 400-character payloads), on disk, a process each"
    )
    headers = [
        "store",
        "upsert/s",
        "index s",
        "search p50 ms",
        "p95 ms",
        "reopen cold s",
        "warm s",
        "GIL held s",
        "read MB",
        "p50 after ms",
    ]
    print(table(headers, rows))
    print(
        "  index s: Edge builds HNSW in a child process on a copy while the store serves searches; local\n"
        "  mode has none. Ratios: faster is above 1.00x, both measured in this run. reopen: a worker\n"
        "  started again on the folder (a fresh process) opens every collection and searches once, its\n"
        "  files out of the page cache (cold, dropped file by file) or read through just before (warm);\n"
        "  GIL held: the longest a thread ticking every 10 ms waited during the cold reopen; read MB: what\n"
        "  it read from disk (/proc/self/io read_bytes); p50 after: 200 searches after it."
    )
    memory_rows = []
    for kind in kinds:
        w, r, warm = results[kind]["write"], results[kind]["reopen"], results[kind]["warm"]
        for process, figures in (
            ("the writer (its pass, the store open)", w["memory"]),
            ("a restarted worker (cold)", r["memory"]),
            ("a restarted worker (warm)", warm["memory"]),
        ):
            memory_rows.append(
                [
                    f"{labels[kind]}: {process}",
                    figures["peak"],
                    figures["VmRSS"],
                    figures["RssAnon"],
                    figures["RssFile"],
                ]
            )
        if w["builder_mb"]:
            memory_rows.append(
                [f"{labels[kind]}: the index builder (a child process)", w["builder_mb"], None, None, None]
            )
    print(f"\n   Memory of each process, MB ({points:,} passages)")
    print(
        table(["process", "VmHWM (peak)", "VmRSS", "RssAnon (heap)", "RssFile (mapped files)"], memory_rows)
    )
    print(
        "  VmRSS = RssAnon + RssFile (+ shared memory), read with the store open. RssFile is pages of the\n"
        "  shard's mapped files: page cache the kernel may drop and read again; RssAnon cannot be dropped.\n"
        "  VmHWM is the peak of the resident total; the builder's is its ru_maxrss."
    )


@dataclass
class _Step:
    """One process of section 3: how it ended, its time, its group's figures, what it reported."""

    process: str
    outcome: str
    seconds: float | None
    usage: Usage
    result: dict[str, Any] | None


_JOIN = 'echo $$ > "$0" && exec "$@"'
"""A shell that joins the group at ``$0``, then execs the rest: the process is in it from its start."""


def _build_state(usage: Usage, errors: str) -> str:
    """How the index build in a group ended, from the group's OOM kills and the writer's log."""
    if usage.oom_kills:
        return "OOM-killed"
    return "failed" if "building the search index" in errors else "completed"


def _in_group(limit_mb: int | None, step: str, *args: str, together: bool = False) -> list[_Step]:
    """Runs the script with ``args`` in a fresh group; a writer's index builder in a group of its own
    (``together``: left in the writer's, as in a container, the group's figures then both's)."""
    group = MemoryGroup(f"chamvi-bench-{step}", limit_mb)
    builder: MemoryGroup | None = None
    seen_builder = False
    try:
        if step == "writer" and not together:
            builder = MemoryGroup("chamvi-bench-builder", limit_mb)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            started = time.perf_counter()
            process = subprocess.Popen(  # the shell joins the group, then becomes the script
                ["/bin/sh", "-c", _JOIN, str(group.path / "cgroup.procs"), sys.executable, __file__, *args],
                stdout=out,
                stderr=err,
            )
            while process.poll() is None:
                if builder is not None:
                    for pid in group.pids():
                        if pid != process.pid:
                            with contextlib.suppress(OSError):  # gone already
                                builder.add(pid)
                                seen_builder = True
                time.sleep(0.01)
            seconds = time.perf_counter() - started
            out.seek(0)
            err.seek(0)
            lines, errors = out.read().strip().splitlines(), err.read()
        code = process.returncode
        result: dict[str, Any] | None = json.loads(lines[-1]) if code == 0 and lines else None
        usage = group.usage()
        outcome = "completed" if code == 0 else "OOM-killed" if code == -signal.SIGKILL else f"exit {code}"
        if step == "writer" and together:
            build = _build_state(usage, errors)
            if code == 0 and build != "completed":
                outcome += f", build {build}"
            return [_Step("writer + index builder", outcome, seconds, usage, result)]
        steps = [_Step(step, outcome, seconds, usage, result)]
        if builder is not None:
            built = builder.usage()
            if seen_builder or built.oom_kills or "building the search index" in errors:
                index_s = result["index_s"] if result else None
                steps.append(_Step("index builder", _build_state(built, errors), index_s, built, None))
        return steps
    finally:
        try:
            group.close()
        finally:
            if builder is not None:
                builder.close()


def _steps_in_groups(points: int, limit_mb: int | None, keep: bool, together: bool) -> list[_Step]:
    """Section 3's processes in order, stopping after one that did not complete (the folder would lack it)."""
    folder = Path(tempfile.mkdtemp(prefix="chamvi-bench-edge-"))
    try:
        steps = _in_group(
            limit_mb,
            "writer",
            *("--one", "edge", "--points", str(points), "--folder", str(folder)),
            together=together,
        )
        if not steps[0].outcome.startswith("completed"):
            return steps
        for cache in ("cold", "warm"):
            steps += _in_group(
                limit_mb, f"reopen-{cache}", "--reopen", "edge", "--folder", str(folder), "--cache", cache
            )
            if steps[-1].outcome != "completed":
                break
        return steps
    finally:
        if keep:
            print(f"  kept edge's folder: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)


def bench_limits(points: int, limit_mb: int, unlimited_too: bool, keep: bool, together: bool) -> None:
    """Section 3: each process under ``limit_mb`` (after the same without a limit, if asked)."""
    found = controller()
    if found is None:
        print("\n3. no cgroup memory controller on this machine: section 1 without a limit instead")
        bench_stores(points, local=False, keep=keep)
        return
    before = {s.process: s for s in _steps_in_groups(points, None, keep, together)} if unlimited_too else {}
    limited = _steps_in_groups(points, limit_mb, keep, together)
    rows = []
    for limit, steps in (([None] * len(before), list(before.values())), ([limit_mb] * len(limited), limited)):
        for mb, step in zip(limit, steps, strict=True):
            unlimited = before.get(step.process) if mb is not None else None
            p50 = step.result["p50_ms"] if step.result else None
            rows.append(
                [
                    step.process,
                    "none" if mb is None else f"{mb:,}",
                    step.outcome,
                    step.seconds,
                    ratio(unlimited.seconds, step.seconds)
                    if unlimited and unlimited.seconds and step.seconds
                    else None,
                    step.usage.peak_mb,
                    step.usage.failcnt,
                    step.usage.refault_mb,
                    step.usage.anon_mb,
                    step.usage.cache_mb,
                    step.usage.mapped_mb,
                    p50,
                ]
            )
    shape = "the writer and its index builder in one" if together else "each process in a"
    print(f"\n3. {points:,} passages (Qdrant Edge), {shape} memory cgroup of its own ({found[0]})")
    headers = [
        "process",
        "limit MB",
        "outcome",
        "s",
        "vs no limit",
        "peak MB",
        "failcnt",
        "refault MB",
        "anon peak MB",
        "cache peak MB",
        "mapped peak MB",
        "search p50 ms",
    ]
    print(table(headers, rows))
    print(
        "  peak MB: the group's max_usage (anon + page cache charged to it); failcnt: how often a charge\n"
        "  hit the limit (0 on kernels that no longer count it: a peak at the limit says it); refault MB:\n"
        "  file pages read again after the kernel dropped them. anon / cache / mapped peak: memory.stat\n"
        "  sampled every 0.2 s, each kind's own peak (anon cannot be dropped without swap; cache can,\n"
        "  unless dirty or locked). s: the process's wall time (the builder's: the writer's wait for the\n"
        "  index); vs no limit: the same step without a limit in this run over it (below 1.00x: slower)."
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
    print(f"\n2. First index of {passages:,} passages (Qdrant Edge), a loopback embedder answering in 200 ms")
    print(table(["pass", "s", "embedding calls", "speed-up (same run)"], rows))
    print("  target: 4 in flight >= 3.50x one at a time.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--one")
    parser.add_argument("--reopen")
    parser.add_argument("--folder")
    parser.add_argument("--cache", choices=["cold", "warm"], default="cold")
    parser.add_argument("--embedding-only", action="store_true")
    parser.add_argument("--stores-only", action="store_true")
    parser.add_argument("--keep", action="store_true", help="leave the stores' folders (printed) in place")
    parser.add_argument("--passages", type=int, default=15_000)
    parser.add_argument("--memory-limit", type=int, metavar="MB", help="section 3 under this limit")
    parser.add_argument(
        "--unlimited-too", action="store_true", help="section 3: each step without a limit too"
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="section 3: the index builder in the writer's group (a container)",
    )
    args = parser.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(_write(args.one, args.points, Path(args.folder)))))
        return
    if args.reopen:
        print(json.dumps(asyncio.run(_reopen(args.reopen, Path(args.folder), args.cache))))
        return
    if args.memory_limit:
        bench_limits(args.points, args.memory_limit, args.unlimited_too, args.keep, args.together)
        return
    if not args.embedding_only:
        bench_stores(args.points, local=args.points <= 200_000, keep=args.keep)
    if not args.stores_only:
        asyncio.run(bench_embedding(args.passages))


if __name__ == "__main__":
    main()
