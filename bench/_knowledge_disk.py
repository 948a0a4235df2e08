"""Section 5 of ``knowledge.py``: passes over the embedded store on disk, as ``chamvi dev`` runs it.

Kept apart from ``knowledge.py`` (which measures through Temporal) because it needs no server: it
calls ``Indexer.run_pass`` over a folder of generated markdown files, with Qdrant Edge in a temporary
folder (the embedded default), qdrant-client's local mode on disk (``path=``, the default before) and
in memory, and times a first index, a no-op re-sync and a re-sync after 1 % of the files were
edited, 1 % deleted and 1 % added. Then LangChain and LlamaIndex make the same passes when the
``bench`` extra installed them (``_peers.py``); a ratio against a peer is printed only then.

Local mode on disk stores every point it writes as one SQLite transaction, so what a pass writes,
not what it reads, decides its time there: the section prints the embedding calls and the registry
writes beside the times.
"""

from __future__ import annotations

import hashlib
import math
import random
import shutil
import statistics
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import _peers
from _common import ratio, table
from qdrant_client import AsyncQdrantClient

from chamvi.knowledge import (
    Document,
    SourceContext,
    chunk,
    folder,
    knowledge_collection,
)
from chamvi.knowledge.documents import content_hash
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.indexing import BATCH_SIZE, Indexer
from chamvi.models.knowledge import PassStats
from chamvi.vectors import VectorStore
from chamvi.vectors.client import ClientStore
from chamvi.vectors.edge import EdgeStore

MODEL = "bench/digest-32"
NAME = "disk"


_WORDS = (
    *("durable", "agent", "workflow", "history", "worker", "crash", "resume", "collection", "document"),
    *("folder", "source", "passage", "embedding", "qdrant", "search", "cosine", "resync", "generation"),
    *("alias", "token", "latency", "memory", "refund", "invoice"),
)


class DigestEmbedder:
    """A vector from each text's BLAKE2b digest: deterministic and nearly free, so a pass's time is
    the engine's own and Qdrant's, not a model's (``test/hash-64`` costs ~3 ms a passage here)."""

    ref = MODEL
    dimensions = 32

    def __init__(self) -> None:
        self.calls = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [[b / 255 + 0.01 for b in hashlib.blake2b(t.encode(), digest_size=32).digest()] for t in texts]


def embedders() -> EmbeddingRegistry:
    registry = EmbeddingRegistry()
    registry.register(MODEL, DigestEmbedder())
    return registry


def _markdown(rng: random.Random, index: int) -> str:
    """A markdown file of one to three paragraphs, some long enough to make two passages."""
    paragraphs = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        words = rng.choices(_WORDS, k=rng.randint(40, 260))
        paragraphs.append(" ".join(words).capitalize() + ".")
    return f"# Page {index}\n\n" + "\n\n".join(paragraphs) + "\n"


def write_corpus(root: Path, count: int, seed: int = 15) -> None:
    rng = random.Random(seed)
    for i in range(count):
        folder_path = root / f"part{i % 50:02d}"
        folder_path.mkdir(exist_ok=True)
        (folder_path / f"page{i:06d}.md").write_text(_markdown(rng, i))


def change_corpus(root: Path, count: int, seed: int = 16) -> tuple[int, int, int]:
    """Edits 1 %, deletes 1 % and adds 1 % of ``count`` files; returns the three numbers."""
    rng = random.Random(seed)
    step = max(1, count // 100)
    edited = deleted = 0
    for i in range(0, count, 100):
        (root / f"part{i % 50:02d}" / f"page{i:06d}.md").write_text(_markdown(rng, i) + "Edited.\n")
        edited += 1
        (root / f"part{(i + 1) % 50:02d}" / f"page{i + 1:06d}.md").unlink()
        deleted += 1
    for i in range(count, count + step):
        (root / f"part{i % 50:02d}" / f"page{i:06d}.md").write_text(_markdown(rng, i))
    return edited, deleted, step


async def read_and_hash(root: Path) -> tuple[float, int]:
    """Seconds to read every file through the folder source and hash it, and the passages they make."""
    started = time.perf_counter()
    passages = 0
    async for item in folder(root).documents(SourceContext()):
        assert isinstance(item, Document)
        content_hash(item)
    elapsed = time.perf_counter() - started
    async for item in folder(root).documents(SourceContext()):
        assert isinstance(item, Document)
        passages += len(chunk(item.content))
    return elapsed, passages


@dataclass
class Pass:
    seconds: float
    stats: PassStats


@dataclass
class Run:
    store: str
    first: Pass
    second: Pass
    """The pass right after the first: it reads again the files changed within 2 s of their
    folder's listing in the first pass, and writes their versions."""
    noop: list[Pass]
    changed: Pass
    passages: int
    read: float


async def _one(indexer: Indexer, root: Path) -> Pass:
    collection = knowledge_collection(NAME, model=MODEL, sources=[folder(root)])
    started = time.perf_counter()
    meta = await indexer.run_pass(collection)
    seconds = time.perf_counter() - started
    assert meta.last_stats is not None
    return Pass(seconds, meta.last_stats)


async def measure(store: str, count: int, repeats: int) -> Run:
    work = Path(tempfile.mkdtemp(prefix="chamvi-bench-disk-"))
    try:
        root = work / "docs"
        root.mkdir()
        write_corpus(root, count)
        vectors: VectorStore
        if store == "edge":  # the embedded default, as `chamvi dev` runs it
            vectors = EdgeStore(work / "qdrant-edge")
        elif store == "disk":  # qdrant-client local mode on disk, the default before Qdrant Edge
            vectors = ClientStore(AsyncQdrantClient(path=str(work / "qdrant")))
        else:
            vectors = ClientStore(AsyncQdrantClient(location=":memory:"))
        indexer = Indexer(KnowledgeIndex(vectors), embedders())
        first = await _one(indexer, root)
        if first.stats.embedded != count:
            raise RuntimeError(f"the first pass over {store} embedded {first.stats}, expected {count:,}")
        second = await _one(indexer, root)
        if second.stats.embedding_calls:
            raise RuntimeError(f"the second pass over {store} found {second.stats}")
        noop = []
        reads: list[float] = []
        for _ in range(repeats):
            # the baseline in the same state as the pass it is compared with: files in the page cache
            read, passages = await read_and_hash(root)
            reads.append(read)
            again = await _one(indexer, root)
            if again.stats.unchanged != count or again.stats.embedding_calls:
                raise RuntimeError(f"the no-op pass over {store} found {again.stats}")
            noop.append(again)
        edited, deleted, added = change_corpus(root, count)
        changed = await _one(indexer, root)
        stats = changed.stats
        if (stats.embedded, stats.deleted) != (edited + added, deleted):
            raise RuntimeError(
                f"the re-sync over {store} found {stats}, expected {edited}+{added}, {deleted}"
            )
        await vectors.close()
        return Run(store, first, second, noop, changed, passages, statistics.median(reads))
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def bench_disk(count: int, repeats: int) -> None:
    runs = [await measure(store, count, repeats) for store in ("edge", "disk", "memory")]
    rows = []
    for run in runs:
        noop = statistics.median(p.seconds for p in run.noop)
        rows.append(
            [
                f"{run.store}: first index",
                run.first.seconds,
                run.first.stats.embedding_calls,
                None,
            ]
        )
        rows.append([f"{run.store}: second pass", run.second.seconds, run.second.stats.embedding_calls, None])
        rows.append(
            [
                f"{run.store}: no-op re-sync",
                noop,
                run.noop[0].stats.embedding_calls,
                ratio(noop, run.read),
            ]
        )
        rows.append(
            [
                f"{run.store}: 1 %+1 %+1 % re-sync",
                run.changed.seconds,
                run.changed.stats.embedding_calls,
                ratio(run.changed.seconds, noop),
            ]
        )
    disk = runs[0]
    print(
        f"\n5. The embedded default: Indexer.run_pass over a folder of {count:,} generated markdown files "
        f"({disk.passages:,} passages, {MODEL}),\n   edge: Qdrant Edge in a temporary folder "
        f"(what `chamvi dev` uses); disk: qdrant-client local mode on disk (the default before);\n"
        f"   memory: local mode in memory;"
        f"   no-op: median of {repeats} after the second pass"
    )
    print(table(["pass", "s", "embedding calls", "/ no-op or / read"], rows))
    expected = math.ceil(disk.passages / BATCH_SIZE)
    print(
        "  second pass: the files the first one read within 2 s of their writing (as git, their\n"
        f"  times cannot tell yet) are read again and take their version: {_read_again(disk.second):,} "
        f"with {disk.store}.\n"
        f"  read + hash the {count:,} files through folder(), median before each no-op: {disk.read:.2f} s. "
        "Embedding calls of the "
        f"first index: {disk.first.stats.embedding_calls} for {disk.passages:,} passages (ceil(passages / "
        f"{BATCH_SIZE}) = {expected}).\n"
        "  '/ no-op or / read': the no-op against reading and hashing the files (target within 1.20x),\n"
        "  the 1 %+1 %+1 % re-sync against the no-op (<= 3.00x)."
    )
    print_peers(runs[0], count, repeats)


def print_peers(edge: Run, count: int, repeats: int) -> None:
    """The same passes by LangChain and LlamaIndex in this run, and ratios against Qdrant Edge's only."""
    missing = _peers.available()
    if missing is not None:
        print(f"  Peers: not measured in this run ({missing}), so no ratio against them is printed.")
        return
    measured = []
    for passes in (_peers.langchain_passes, _peers.llamaindex_passes):
        work = Path(tempfile.mkdtemp(prefix="chamvi-bench-peer-"))
        try:
            root = work / "docs"
            root.mkdir()
            write_corpus(root, count)
            with warnings.catch_warnings():  # their local-mode and SHA-1 notices
                warnings.simplefilter("ignore", UserWarning)
                measured.append(passes(root, work, lambda root=root: change_corpus(root, count)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    ours = {
        "first index": edge.first.seconds,
        "no-op re-sync": statistics.median(p.seconds for p in edge.noop),
        "1 %+1 %+1 % re-sync": edge.changed.seconds,
    }
    rows = [
        [
            kind,
            seconds,
            *(getattr(run, field) for run in measured),
            *(ratio(getattr(run, field), seconds) for run in measured),
        ]
        for (kind, seconds), field in zip(ours.items(), ("first", "noop", "changed"), strict=True)
    ]
    names = [run.peer for run in measured]
    print(
        f"\n   Peers on the same {count:,} files in this run (vectors in qdrant-client local mode on disk,\n"
        "   records in memory; see bench/_peers.py), against edge above; their no-op is one pass, not a "
        f"median of {repeats}"
    )
    print(table(["pass", "edge s", *(f"{n} s" for n in names), *(f"{n} / edge" for n in names)], rows))
    print("  Above 1.00x the peer took longer than chamvi's pass.")


def _read_again(second: Pass) -> int:
    return second.stats.unchanged - second.stats.not_read
