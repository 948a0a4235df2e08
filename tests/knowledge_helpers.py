"""Helpers for knowledge tests: a worker with its own Qdrant, embedders that count, wait or fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.client import Client, WorkflowExecution, WorkflowQueryFailedError
from temporalio.service import RPCError
from temporalio.worker import PatchActivationInput, Worker

from chamvi import App, define_agent
from chamvi._constants import (
    KNOWLEDGE_ID_PREFIX,
    KNOWLEDGE_PASS_ID_PREFIX,
    KNOWLEDGE_PASS_WORKFLOW,
    PATCH_KNOWLEDGE_PASS_WORKFLOW,
    QUERY_KNOWLEDGE_STATE,
)
from chamvi._lifecycle import memory_index
from chamvi.knowledge import knowledge_tools
from chamvi.knowledge.collections import KnowledgeCollection
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.models.knowledge import CollectionMeta, CollectionState
from chamvi.plugin import ChamviPlugin
from chamvi.providers import ModelRegistry, ScriptedModel, ScriptedTurn, reply
from chamvi.runtime import build_worker
from chamvi.worker_state import serving
from tests.polling import PATIENCE_SECONDS, eventually


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

    async def embedding(self) -> bool | None:
        """A probe for ``eventually``: True while a call is under way."""
        return True if self.active else None

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


def reader_app(
    collection: KnowledgeCollection, *embedders: CountingEmbedder, turns: list[ScriptedTurn] | None = None
) -> App:
    """An app with one collection and one agent, ``reader``, that may search it; the reader's model
    is scripted with ``turns`` (by default it just answers) and ``embedders`` serve their refs."""
    registry = EmbeddingRegistry()
    for embedder in embedders:
        registry.register(embedder.ref, embedder)
    models = ModelRegistry()
    models.register("scripted/reader", ScriptedModel(turns or [reply("ok")]))
    reader = define_agent(
        name="reader",
        model="scripted/reader",
        instructions="Read.",
        tools=knowledge_tools(collections=[collection.name]),
    )
    return App(agents=[reader], models=models, embedders=registry, collections=[collection])


def searcher(app: App) -> KnowledgeSearch:
    """The search a worker built for ``app`` serves (what ``knowledge_search`` calls)."""
    runtime = serving(app)
    search = runtime.search if runtime is not None else None
    assert search is not None, "build a worker for the app first"
    return search


def new_store() -> KnowledgeIndex:
    """A throwaway index on the embedded default's engine (Qdrant Edge in a temporary folder)."""
    return memory_index()


@asynccontextmanager
async def knowledge_worker(
    client: Client,
    app: App,
    store: KnowledgeIndex,
    task_queue: str,
    graceful: timedelta = timedelta(seconds=30),
) -> AsyncIterator[None]:
    """A worker that boots knowledge like ``chamvi worker`` does: the pass runs in the background."""
    plugin = ChamviPlugin(app, index=store)
    async with build_worker(client, plugin, task_queue=task_queue, graceful_shutdown_timeout=graceful):
        await plugin.collections_started()
        yield


def before_pass_workflows(patch: PatchActivationInput) -> bool:
    """A worker's patch decision that makes it run collections as chamvi did before pass workflows.

    Both pass-workflow patches (the pass as a child, the move before a live pass) stay off, so a
    collection makes its passes as activities and records no marker: the history chamvi recorded then.
    """
    return not patch.patch_id.startswith(PATCH_KNOWLEDGE_PASS_WORKFLOW)


@asynccontextmanager
async def knowledge_worker_before_pass_workflows(
    client: Client, app: App, store: KnowledgeIndex, task_queue: str
) -> AsyncIterator[None]:
    """:func:`knowledge_worker` as it ran before passes were workflows of their own."""
    plugin = ChamviPlugin(app, index=store)
    async with Worker(
        client, task_queue=task_queue, plugins=[plugin], patch_activation_callback=before_pass_workflows
    ):
        await plugin.collections_started()
        yield


async def pass_workflows(client: Client, name: str) -> list[WorkflowExecution]:
    """The pass workflows of a collection, oldest first."""
    query = (
        f'WorkflowType = "{KNOWLEDGE_PASS_WORKFLOW}" '
        f'AND WorkflowId STARTS_WITH "{KNOWLEDGE_PASS_ID_PREFIX}{name}:"'
    )
    found = [execution async for execution in client.list_workflows(query)]
    return sorted(found, key=lambda execution: execution.start_time)


async def collection_state(client: Client, name: str) -> CollectionState:
    handle = client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name)
    return await handle.query(QUERY_KNOWLEDGE_STATE, result_type=CollectionState)


async def answered_state(client: Client, name: str) -> CollectionState | None:
    """The collection's state, or None while no worker answers: its workflow is not up yet, or no worker
    polls yet ("no poller seen for task queue recently" from a worker process still starting)."""
    try:
        return await collection_state(client, name)
    except (RPCError, WorkflowQueryFailedError):
        return None


async def wait_for_passes(
    client: Client, name: str, passes: int, seconds: float = PATIENCE_SECONDS
) -> CollectionState:
    """Waits until ``passes`` passes of the collection ended (whatever their outcome)."""

    async def probe() -> CollectionState | None:
        state = await answered_state(client, name)
        return state if state is not None and state.passes >= passes and not state.running else None

    return await eventually(probe, f"{passes} finished passes of {name!r}", seconds)


async def wait_for_meta(
    store: KnowledgeIndex, name: str, status: str, model: str | None = None
) -> CollectionMeta:
    """Waits until the collection has ``status`` (and serves ``model``, when one is given)."""

    async def probe() -> CollectionMeta | None:
        meta = await store.meta(name)
        if meta is None or meta.status != status or (model is not None and meta.model != model):
            return None
        return meta

    return await eventually(probe, f"collection {name!r} becoming {status}")
