"""VectorKnowledgeStore for real: a worker indexing the pages into a knowledge collection (Qdrant in
memory, the ``test/hash-64`` embedder), the shared contract, and search by meaning."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, define_agent
from chamvi._starters import request_sync
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.knowledge_store import (
    FileKnowledgeStore,
    KnowledgeStore,
    PageType,
    VectorKnowledgeStore,
    knowledge_store_tools,
    searcher_of,
    store_collection,
)
from chamvi.models.knowledge import CollectionMeta, CollectionState
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.knowledge_helpers import collection_state, knowledge_worker, new_store, wait_for_meta
from tests.knowledge_store.contract import knowledge_store_contract, seed
from tests.polling import eventually

MODEL = "test/hash-64"
_temporal: dict[str, Client] = {}


@pytest.fixture(autouse=True)
def _client_for_the_factory(client: Client) -> None:
    _temporal["client"] = client


async def sync_and_wait(client: Client, task_queue: str, name: str) -> None:
    """Asks the collection for a pass and waits until a pass that started after the request ended."""
    try:
        before = (await collection_state(client, name)).passes
    except Exception:
        before = 0
    await request_sync(client, task_queue, name)

    async def probe() -> CollectionState | None:
        state = await collection_state(client, name)
        return state if state.passes > before and not state.running and not state.queued else None

    state = await eventually(probe, f"collection {name!r} finishing its pass")
    assert state.error is None, state.error


@dataclass
class Indexed:
    store: VectorKnowledgeStore
    files: FileKnowledgeStore
    index: KnowledgeIndex
    client: Client
    task_queue: str

    async def sync(self) -> None:
        await sync_and_wait(self.client, self.task_queue, self.store.collection)

    async def documents(self) -> int:
        meta = await self.index.meta(self.store.collection)
        assert meta is not None
        return meta.documents


@asynccontextmanager
async def indexed(
    tmp_path: Path, page_types: Sequence[PageType] = (), *, follow: bool = True
) -> AsyncIterator[Indexed]:
    """A file store wrapped for search by meaning, its collection served by a worker of its own.

    With ``follow`` every write waits for the pass it asked for, so a search sees it.
    """
    client = _temporal["client"]
    name = f"wiki-{uuid.uuid4().hex[:8]}"
    task_queue = f"kb-vector-{uuid.uuid4().hex[:8]}"
    files = FileKnowledgeStore(tmp_path / "wiki", page_types=page_types)
    app = App(agents=[], collections=[store_collection(files, name, model=MODEL)])
    index = new_store()

    async def synced(collection: str) -> None:
        await sync_and_wait(client, task_queue, collection)

    store = VectorKnowledgeStore(
        files, collection=name, search=lambda: searcher_of(app), on_change=synced if follow else None
    )
    async with knowledge_worker(client, app, index, task_queue):
        await wait_for_meta(index, name, "ready")
        yield Indexed(store, files, index, client, task_queue)


@asynccontextmanager
async def vector_store(tmp_path: Path, page_types: Sequence[PageType]) -> AsyncIterator[KnowledgeStore]:
    async with indexed(tmp_path, page_types) as env:
        yield env.store


globals().update(knowledge_store_contract(vector_store))


async def test_search_ranks_pages_by_their_embeddings_in_the_collection(tmp_path: Path) -> None:
    async with indexed(tmp_path) as env:
        store = env.store
        await seed(store)
        await store.create("concept", "warranty", "Warranty", "Every gadget has a two year warranty.")
        assert await env.documents() == 4
        hits = await store.search("gadget warranty", limit=3)
        assert hits[0].id == "concept/warranty" and hits[0].title == "Warranty"
        assert hits[0].snippet.startswith("Every gadget") and 0 < hits[0].score <= 1
        assert len({h.id for h in hits}) == len(hits) == 3  # one hit per page, its best passage
        # by similarity, a query sharing no word with any page still ranks pages; keywords find none
        assert await env.files.search("zygote") == []
        assert len(await store.search("zygote")) == 4


async def test_a_retired_page_is_never_shown_even_before_the_next_pass(tmp_path: Path) -> None:
    async with indexed(tmp_path, follow=False) as env:
        store = env.store
        await seed(store)
        await store.create("concept", "warranty", "Warranty", "Every gadget has a two year warranty.")
        await env.sync()
        assert (await store.search("gadget warranty"))[0].id == "concept/warranty"
        await store.retire("concept/warranty", "no more gadgets")  # no pass follows (follow=False)
        assert await env.documents() == 4
        assert "concept/warranty" not in [h.id for h in await store.search("gadget warranty")]
        await env.sync()
        assert await env.documents() == 3


async def test_without_a_searcher_or_before_the_first_pass_search_is_by_keywords(tmp_path: Path) -> None:
    files = FileKnowledgeStore(tmp_path)
    await seed(files)
    alone = VectorKnowledgeStore(files, collection="wiki", on_change=None)
    assert await alone.search("refunds") == await files.search("refunds")
    assert await alone.recent_log() == []


def test_store_collection_takes_the_wrapper_s_collection_name(tmp_path: Path) -> None:
    files = FileKnowledgeStore(tmp_path)
    wrapped = VectorKnowledgeStore(files, collection="wiki")
    assert store_collection(wrapped, model=MODEL).name == "wiki"
    assert store_collection(files, "other", model=MODEL).sources[0].kind == "knowledge-store"
    with pytest.raises(Exception, match="searches collection 'wiki', not 'other'"):
        store_collection(wrapped, "other", model=MODEL)
    with pytest.raises(Exception, match="needs the collection's name"):
        store_collection(files, model=MODEL)


async def test_a_write_from_a_tool_call_asks_the_collection_for_a_pass(
    client: Client, chamvi: ChamviClient, task_queue: str, tmp_path: Path
) -> None:
    name = f"wiki-{uuid.uuid4().hex[:8]}"
    files = FileKnowledgeStore(tmp_path)
    holder: dict[str, App] = {}
    store = VectorKnowledgeStore(files, collection=name, search=lambda: searcher_of(holder["app"]))
    models = ModelRegistry()
    content = "Every gadget has a two year warranty."
    models.register(
        "scripted/wiki",
        ScriptedModel(
            [
                call("knowledge_create", type="concept", slug="warranty", title="Warranty", content=content),
                reply("done"),
            ]
        ),
    )
    agent = define_agent(
        name="librarian",
        model="scripted/wiki",
        instructions="Keep the wiki.",
        tools=knowledge_store_tools(store),
    )
    app = holder["app"] = App(
        agents=[agent], models=models, collections=[store_collection(store, model=MODEL)]
    )
    index = new_store()
    async with knowledge_worker(client, app, index, task_queue):
        await wait_for_meta(index, name, "ready")  # the boot pass: nothing to index yet
        run = await chamvi.wait((await chamvi.dispatch("librarian")).run_id)
        assert run.status == RunStatus.COMPLETED

        async def indexed() -> CollectionMeta | None:  # the pass the tool call asked for
            meta = await index.meta(name)
            return meta if meta is not None and meta.documents == 1 else None

        await eventually(indexed, "the indexing of the write")
        hits = await store.search("gadget warranty")
    assert [h.id for h in hits] == ["concept/warranty"]
