"""Helpers for knowledge tests: a worker with its own Qdrant, embedders that count, wait or fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from qdrant_client import AsyncQdrantClient
from temporalio.client import Client

from chamvi import App
from chamvi.constants import KNOWLEDGE_ID_PREFIX, QUERY_KNOWLEDGE_STATE
from chamvi.knowledge.boot import start_knowledge
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.knowledge.search import KNOWLEDGE_SEARCH, KnowledgeSearch
from chamvi.knowledge.state import CollectionMeta, CollectionState
from chamvi.knowledge.store import KnowledgeStore
from chamvi.runtime import build_worker


@dataclass
class CountingEmbedder:
    """``test/hash-64`` vectors, with counts; ``gate`` (when set) holds every call until it opens."""

    ref: str = "test/counting"
    calls: int = 0
    texts: int = 0
    active: int = 0
    most_active: int = 0
    gate: asyncio.Event | None = None
    failures: list[Exception] = field(default_factory=list)
    _hash: HashEmbedder = field(default_factory=lambda: HashEmbedder(64))

    @property
    def dimensions(self) -> int:
        return 64

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.failures:
                raise self.failures.pop(0)
            self.calls += 1
            self.texts += len(texts)
            return [self._hash.vector(t) for t in texts]
        finally:
            self.active -= 1


def searcher(app: App) -> KnowledgeSearch:
    """The search a worker built for ``app`` serves (what ``knowledge_search`` calls)."""
    search = app.provided.get(KNOWLEDGE_SEARCH)
    assert search is not None, "build a worker for the app first"
    return search


def new_store() -> KnowledgeStore:
    return KnowledgeStore(AsyncQdrantClient(location=":memory:"))


@asynccontextmanager
async def knowledge_worker(
    client: Client,
    app: App,
    store: KnowledgeStore,
    task_queue: str,
    graceful: timedelta = timedelta(seconds=30),
) -> AsyncIterator[None]:
    """A worker that boots knowledge like ``chamvi worker`` does: the pass runs in the background."""
    async with build_worker(
        client, app, task_queue=task_queue, store=store, graceful_shutdown_timeout=graceful
    ):
        await start_knowledge(client, app, store, task_queue)
        yield


async def collection_state(client: Client, name: str) -> CollectionState:
    handle = client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name)
    return await handle.query(QUERY_KNOWLEDGE_STATE, result_type=CollectionState)


async def wait_for_passes(client: Client, name: str, passes: int, attempts: int = 400) -> CollectionState:
    """Waits until ``passes`` passes of the collection ended (whatever their outcome)."""
    for _ in range(attempts):
        try:
            state = await collection_state(client, name)
        except Exception:
            state = None
        if state is not None and state.passes >= passes and not state.running:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"collection {name!r} never finished {passes} passes")


async def wait_for_meta(store: KnowledgeStore, name: str, status: str, attempts: int = 400) -> CollectionMeta:
    for _ in range(attempts):
        meta = await store.meta(name)
        if meta is not None and meta.status == status:
            return meta
        await asyncio.sleep(0.05)
    raise AssertionError(f"collection {name!r} never became {status}")
