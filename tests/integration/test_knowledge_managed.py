"""Managed collections through their service (the HTTP API's layer below the routes)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from chamvi import App
from chamvi._constants import KNOWLEDGE_ID_PREFIX
from chamvi._starters import request_sync
from chamvi.errors import ConflictError, InvalidInputError, NotFoundError
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge.managed import ManagedCollections
from chamvi.models.knowledge import CollectionMeta, CollectionState, CollectionStatus, DocumentEntry
from tests.knowledge_helpers import (
    CountingEmbedder,
    collection_state,
    knowledge_worker,
    new_store,
    searcher,
)
from tests.polling import eventually


class RefusingEmbedder(CountingEmbedder):
    """Refuses (400) any input that contains the word REFUSE, like a provider refusing a too-long input."""

    async def embed(self, texts: list[str]) -> list[list[float]]:
        from chamvi.errors import ProviderHTTPError

        if any("REFUSE" in t for t in texts):
            raise ProviderHTTPError(400, "embedding provider answered 400: input refused")
        return await super().embed(texts)


@pytest.fixture
def name() -> str:
    return f"tickets-{uuid.uuid4().hex[:8]}"


async def _no_docs() -> AsyncIterator[dict[str, str]]:
    if False:
        yield {}


def setup(
    client: Client, task_queue: str, *embedders: CountingEmbedder, default: str
) -> tuple[App, KnowledgeIndex, ManagedCollections]:
    registry = EmbeddingRegistry()
    for embedder in embedders:
        registry.register(embedder.ref, embedder)
    app = App(
        agents=[],
        embedders=registry,
        collections=[
            knowledge_collection(
                "declared-docs", model=embedders[0].ref, sources=[define_source(documents=_no_docs)]
            )
        ],
    )
    store = new_store()
    managed = ManagedCollections(
        store,
        app.embedders,
        default_model=default,
        declared=app.collections,
        request_sync=lambda collection: request_sync(client, task_queue, collection),
    )
    return app, store, managed


async def serving(managed: ManagedCollections, name: str, model: str) -> CollectionMeta | None:
    meta = await managed.get(name)
    return meta if meta.model == model and meta.status == "ready" else None


async def wait_for_document(
    managed: ManagedCollections, name: str, document_id: str, status: str, content: str | None = None
) -> DocumentEntry:
    """Waits until the document has ``status`` (and holds ``content``, when one is given).

    A new collection's first pass marks its documents ready before it ends, and the collection is
    ``pending`` (unsearchable, never ``stale``) until it ends: so a ready document waits for that too.
    """

    async def probe() -> DocumentEntry | None:
        entry = await managed.document(name, document_id)
        if entry.status != status or (content is not None and entry.content != content):
            return None
        if status == "ready" and (await managed.get(name)).status == CollectionStatus.PENDING:
            return None
        return entry

    return await eventually(probe, f"{document_id} becoming {status}")


async def test_a_put_document_is_embedded_in_the_background_and_the_same_content_is_not_embedded_again(
    client: Client, task_queue: str, name: str
) -> None:
    embedder = RefusingEmbedder(ref="test/managed")
    app, store, managed = setup(client, task_queue, embedder, default=embedder.ref)
    async with knowledge_worker(client, app, store, task_queue):
        created = await managed.create(name)
        assert (created.kind, created.status, created.trusted) == ("managed", "pending", False)
        entry, accepted = await managed.put(
            name, "T-1042", content="Exports over 10 000 rows time out.", title="Export"
        )
        assert accepted and entry.status == "pending"
        await wait_for_document(managed, name, "T-1042", "ready")
        calls = embedder.calls
        _, again = await managed.put(
            name, "T-1042", content="Exports over 10 000 rows time out.", title="Export"
        )
        await asyncio.sleep(0.5)
        embedded_again = embedder.calls - calls
        hits = await searcher(app).search([name], "exports time out", top_k=3)
    assert not again and embedded_again == 0
    assert hits.untrusted and hits.matches[0].document == "T-1042"
    meta = await managed.get(name)
    assert meta.status == "ready" and meta.documents == 1


async def test_a_refused_document_fails_with_the_provider_error_and_a_new_put_tries_again(
    client: Client, task_queue: str, name: str
) -> None:
    embedder = RefusingEmbedder(ref="test/managed")
    app, store, managed = setup(client, task_queue, embedder, default=embedder.ref)
    async with knowledge_worker(client, app, store, task_queue):
        await managed.create(name)
        await managed.put(name, "bad", content="REFUSE this one")
        await managed.put(name, "good", content="A fine ticket")
        await wait_for_document(managed, name, "bad", "failed")
        failed = await managed.document(name, "bad")
        page = await managed.documents(name, status="failed")
        _, retried = await managed.put(
            name, "bad", content="REFUSE this one"
        )  # the same content: tried again
        assert retried
        await wait_for_document(managed, name, "bad", "failed")
    assert failed.error is not None and "input refused" in failed.error
    assert [d.id for d in page.data] == ["bad"] and page.total == 1


async def test_a_changed_default_model_makes_it_stale_and_a_sync_reembeds_into_a_new_generation(
    client: Client, task_queue: str, name: str
) -> None:
    old, new = CountingEmbedder(ref="test/old"), CountingEmbedder(ref="test/new")
    app, store, managed = setup(client, task_queue, old, new, default=old.ref)
    async with knowledge_worker(client, app, store, task_queue):
        await managed.create(name)
        await managed.put(name, "a", content="first ticket")
        await wait_for_document(managed, name, "a", "ready")
        managed.default_model = new.ref  # CHAMVI_KNOWLEDGE_MODEL changed
        assert (await managed.get(name)).status == "stale"
        await managed.put(name, "b", content="second ticket")  # still embedded with the model it serves
        await wait_for_document(managed, name, "b", "ready")
        assert new.calls == 0
        await managed.sync(name)
        meta = await eventually(lambda: serving(managed, name, new.ref), f"{name} serving {new.ref}")
    assert (meta.generation, meta.documents) == (2, 2)
    assert new.texts == 2  # both documents, from the content kept in the registry


async def test_deleting_a_document_removes_it_from_the_next_search(
    client: Client, task_queue: str, name: str
) -> None:
    embedder = CountingEmbedder(ref="test/managed")
    app, store, managed = setup(client, task_queue, embedder, default=embedder.ref)
    async with knowledge_worker(client, app, store, task_queue):
        await managed.create(name)
        await managed.put(name, "a/b c", content="refund policy for tickets")
        await wait_for_document(managed, name, "a/b c", "ready")
        await managed.delete_document(name, "a/b c")
        hits = await searcher(app).search([name], "refund policy", top_k=3)
        with pytest.raises(NotFoundError):
            await managed.document(name, "a/b c")
        await managed.delete(name)
        with pytest.raises(NotFoundError):
            await managed.get(name)
    assert hits.matches == []


@asynccontextmanager
async def first_pass_held(
    client: Client, task_queue: str, name: str, document_id: str, content: str
) -> AsyncIterator[tuple[CountingEmbedder, App, ManagedCollections]]:
    """A managed collection whose pass is embedding its first document, held until the gate opens."""
    embedder = CountingEmbedder(ref="test/managed", gate=asyncio.Event())
    app, store, managed = setup(client, task_queue, embedder, default=embedder.ref)
    async with knowledge_worker(client, app, store, task_queue):
        await managed.create(name)
        await managed.put(name, document_id, content=content)
        await eventually(embedder.embedding, f"the pass embedding {document_id}")
        yield embedder, app, managed


async def test_a_put_while_a_pass_embeds_the_previous_content_is_not_lost(
    client: Client, task_queue: str, name: str
) -> None:
    async with first_pass_held(client, task_queue, name, "doc", "version one") as (embedder, app, managed):
        await managed.put(name, "doc", content="version two")  # arrives while version one is embedded
        assert embedder.gate is not None
        embedder.gate.set()
        entry = await wait_for_document(managed, name, "doc", "ready", content="version two")
        hits = await searcher(app).search([name], "version", top_k=3)
    assert entry.content == "version two" and entry.status == "ready"
    assert [m.text for m in hits.matches] == ["version two"]


async def signals(client: Client, name: str) -> int:
    history = await client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name).fetch_history()
    return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED for e in history.events)


async def queued(client: Client, name: str) -> bool | None:
    return True if (await collection_state(client, name)).queued else None


async def settled(client: Client, name: str) -> CollectionState | None:
    state = await collection_state(client, name)
    return None if state.running or state.queued else state


async def test_puts_while_a_pass_is_already_queued_add_no_signal_and_all_are_embedded(
    client: Client, task_queue: str, name: str
) -> None:
    async with first_pass_held(client, task_queue, name, "doc-0", "ticket 0") as (embedder, _, managed):
        await managed.put(name, "doc-1", content="ticket 1")  # during the pass: one more is owed
        await eventually(lambda: queued(client, name), "a second pass queued")
        before = await signals(client, name)
        for i in range(2, 40):
            await managed.put(name, f"doc-{i}", content=f"ticket {i}")
        again = await request_sync(client, task_queue, name)
        after = await signals(client, name)
        assert embedder.gate is not None
        embedder.gate.set()
        for i in range(40):
            await wait_for_document(managed, name, f"doc-{i}", "ready")
        state = await eventually(lambda: settled(client, name), "the collection settling")
    assert (after, again) == (before, False)  # 39 requests met by the pass already owed
    assert state.meta is not None and state.meta.last_stats is not None
    assert (state.meta.last_stats.embedded, state.meta.last_stats.embedding_calls) == (39, 1)


async def test_the_service_refuses_what_the_seed_refuses(client: Client, task_queue: str, name: str) -> None:
    embedder = CountingEmbedder(ref="test/managed")
    _, _, managed = setup(client, task_queue, embedder, default=embedder.ref)
    with pytest.raises(ConflictError, match="declared in the code"):
        await managed.create("declared-docs")
    with pytest.raises(InvalidInputError, match="invalid"):
        await managed.create("Bad Name")
    await managed.create(name)
    with pytest.raises(ConflictError, match="already exists"):
        await managed.create(name)
    with pytest.raises(InvalidInputError, match="at most 1048576"):
        await managed.put(name, "big", content="x" * 1_048_577)
    with pytest.raises(InvalidInputError):
        await managed.put(name, "x" * 256, content="long id")
    with pytest.raises(NotFoundError):
        await managed.put("no-such-collection", "a", content="x")
    managed.default_model = None
    with pytest.raises(ConflictError, match="CHAMVI_KNOWLEDGE_MODEL"):
        await managed.create(f"{name}-2")
