"""Generations: a model change writes the next one behind the alias; restarts resume it; orphans."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime, TelemetryConfig

from chamvi import App, ChamviClient
from chamvi.errors import ChamviValidationError, KnowledgeNotReadyError
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.providers import call, reply
from tests.knowledge_helpers import (
    CountingEmbedder,
    knowledge_worker,
    new_store,
    reader_app,
    searcher,
    wait_for_meta,
    wait_for_passes,
)
from tests.polling import eventually

DOCUMENTS = {f"doc-{i}": f"Passage number {i} about topic {i % 3}." for i in range(70)}  # two batches


@pytest.fixture
def name() -> str:
    return f"gen-{uuid.uuid4().hex[:8]}"


async def _documents() -> AsyncIterator[dict[str, str]]:
    for document_id, content in DOCUMENTS.items():
        yield {"id": document_id, "content": content}


def app_for(name: str, *embedders: CountingEmbedder, model: str, turns: list | None = None) -> App:
    collection = knowledge_collection(name, model=model, sources=[define_source(documents=_documents)])
    return reader_app(collection, *embedders, turns=turns)


async def indexed_once(
    client: Client, task_queue: str, name: str, ref: str = "test/counting"
) -> tuple[KnowledgeIndex, CountingEmbedder]:
    """A new store whose collection a first worker indexed with ``ref``, then stopped."""
    store, embedder = new_store(), CountingEmbedder(ref=ref)
    async with knowledge_worker(client, app_for(name, embedder, model=ref), store, task_queue):
        await wait_for_meta(store, name, "ready")
    return store, embedder


async def generations(store: KnowledgeIndex, name: str) -> list[int]:
    return [g for g in range(1, 6) if await store.generation_exists(name, g)]


async def test_a_model_change_writes_the_next_generation_while_searches_read_the_current_one(
    client: Client, task_queue: str, name: str
) -> None:
    store, old = await indexed_once(client, task_queue, name, "test/old")
    new = CountingEmbedder(ref="test/new", gate=asyncio.Event())
    app = app_for(name, old, new, model="test/new")
    async with knowledge_worker(client, app, store, task_queue):
        stale = await wait_for_meta(store, name, "stale")
        during = await searcher(app).search([name], "passage number 4", top_k=1)
        assert new.gate is not None
        new.gate.set()
        ready = await wait_for_meta(store, name, "ready")
        after = await searcher(app).search([name], "passage number 4", top_k=1)
    assert (stale.generation, stale.building, stale.model) == (1, 2, "test/old")
    assert during.matches[0].document == "doc-4"  # read from generation 1 with the old model
    assert (ready.generation, ready.model, ready.building) == (2, "test/new", None)
    assert after.matches[0].document == "doc-4"
    assert await generations(store, name) == [2]  # the old generation is deleted after the switch
    assert new.texts >= len(DOCUMENTS)


class DyingEmbedder(CountingEmbedder):
    """Its first batch lands; the next call fails, as if the worker died mid-pass."""

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self.calls >= 1:
            raise RuntimeError("the worker died")
        return await super().embed(texts)


async def test_a_restart_mid_way_resumes_the_same_generation(
    client: Client, task_queue: str, name: str
) -> None:
    store, old = await indexed_once(client, task_queue, name, "test/old")
    dying = DyingEmbedder(ref="test/new")
    async with knowledge_worker(client, app_for(name, old, dying, model="test/new"), store, task_queue):
        await wait_for_passes(client, name, 2)
    building = await store.meta(name)
    assert building is not None and (building.status, building.generation, building.building) == (
        "stale",
        1,
        2,
    )
    assert dying.texts == 64
    resumed = CountingEmbedder(ref="test/new")
    async with knowledge_worker(client, app_for(name, old, resumed, model="test/new"), store, task_queue):
        ready = await wait_for_meta(store, name, "ready")
    assert (ready.generation, ready.model, ready.documents) == (2, "test/new", len(DOCUMENTS))
    assert resumed.texts == len(DOCUMENTS) - 64  # only what had not landed in generation 2


class StallingEmbedder(CountingEmbedder):
    """Its first batch lands; the next call never answers, until the worker is stopped under it."""

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self.calls >= 1:
            self.active += 1
            await asyncio.Event().wait()
        return await super().embed(texts)


async def test_a_model_change_survives_a_worker_restart_in_the_middle_of_its_pass(
    client: Client, task_queue: str, name: str
) -> None:
    store, old = await indexed_once(client, task_queue, name, "test/old")
    stalling = StallingEmbedder(ref="test/new")
    app = app_for(name, old, stalling, model="test/new")

    async def first_batch_landed() -> bool | None:
        # the calls of a pass are in flight together: the second one stalls before the first is written
        written = await store.count_passages(name, 2) == 64
        return True if written and stalling.active else None

    async with knowledge_worker(client, app, store, task_queue, graceful=timedelta(0)):
        await eventually(first_batch_landed, "the first batch of the re-embed written, the second stalling")
    # the worker is gone mid-pass; searches still read generation 1
    assert (await searcher(app).search([name], "passage number 7", top_k=1)).matches[0].document == "doc-7"
    resumed = CountingEmbedder(ref="test/new")
    async with knowledge_worker(client, app_for(name, old, resumed, model="test/new"), store, task_queue):
        ready = await wait_for_meta(store, name, "ready", model="test/new")
    assert (ready.generation, ready.model) == (2, "test/new")
    assert stalling.texts == 64 and resumed.texts == len(DOCUMENTS) - 64


async def test_a_generation_abandoned_for_another_model_is_deleted_and_its_number_never_reused(
    client: Client, task_queue: str, name: str
) -> None:
    store, first = await indexed_once(client, task_queue, name, "test/first")
    second = DyingEmbedder(ref="test/second")  # its pass stops half-way: generation 2 half written
    async with knowledge_worker(client, app_for(name, first, second, model="test/second"), store, task_queue):
        await wait_for_passes(client, name, 2)
    assert await generations(store, name) == [1, 2]
    third = CountingEmbedder(ref="test/third")
    async with knowledge_worker(client, app_for(name, first, third, model="test/third"), store, task_queue):
        meta = await wait_for_meta(store, name, "ready", model="test/third")
    assert meta.generation == 3 and meta.next_generation == 4
    assert await generations(store, name) == [3]


async def test_searching_while_the_previous_model_is_gone_answers_the_seed_error(
    client: Client, chamvi: ChamviClient, task_queue: str, name: str
) -> None:
    store, _ = await indexed_once(client, task_queue, name, "test/retired")
    new = CountingEmbedder(ref="test/new", gate=asyncio.Event())
    turns = [call("knowledge_search", query="passage"), reply("ok")]
    app = app_for(name, new, model="test/new", turns=turns)  # the old model's provider is gone
    async with knowledge_worker(client, app, store, task_queue):
        await wait_for_meta(store, name, "stale")
        run = await chamvi.wait((await chamvi.dispatch("reader")).run_id)
        with pytest.raises(
            KnowledgeNotReadyError, match='previous model "test/retired" is not available here'
        ):
            await searcher(app).search([name], "passage")
        assert new.gate is not None
        new.gate.set()
        await wait_for_meta(store, name, "ready")
    error = next(s for s in run.steps if s.kind == "tool").error
    assert error is not None and "is being re-embedded" in error.message


async def test_a_collection_no_longer_declared_is_orphaned_and_declaring_it_again_picks_it_up(
    client: Client, chamvi: ChamviClient, task_queue: str, name: str
) -> None:
    store, embedder = await indexed_once(client, task_queue, name)
    other = f"{name}-other"
    other_app = app_for(other, embedder, model=embedder.ref)
    async with knowledge_worker(client, other_app, store, task_queue):
        orphaned = await wait_for_meta(store, name, "orphaned")
        await wait_for_meta(store, other, "ready")
        with pytest.raises(ChamviValidationError, match="orphaned"):
            await searcher(other_app).search([name], "passage")
    assert orphaned.documents == len(DOCUMENTS) and await generations(store, name) == [1]
    calls_before = embedder.calls
    app = app_for(name, embedder, model=embedder.ref)
    async with knowledge_worker(client, app, store, task_queue):
        await wait_for_passes(client, name, 1)
        ready = await wait_for_meta(store, name, "ready")
        hits = await searcher(app).search([name], "passage number 2", top_k=1)
    assert ready.generation == 1 and embedder.calls - calls_before == 1  # only the query: no re-embedding
    assert hits.matches[0].document == "doc-2"


async def test_a_rolling_deploy_keeps_search_up_when_an_older_replica_marks_the_collection_orphaned(
    client: Client, task_queue: str, name: str
) -> None:
    store, embedder = await indexed_once(client, task_queue, name)
    new_app = app_for(name, embedder, model=embedder.ref)
    old_app = app_for(f"{name}-other", embedder, model=embedder.ref)  # the previous version of the app
    # the older replica: its own client and SDK runtime, as in another process
    replica = await Client.connect(
        client.service_client.config.target_host,
        data_converter=pydantic_data_converter,
        runtime=Runtime(telemetry=TelemetryConfig()),
    )
    async with knowledge_worker(client, new_app, store, task_queue):
        await wait_for_passes(client, name, 2)  # the new worker's boot pass is over: nothing flips it back
        async with knowledge_worker(replica, old_app, store, task_queue):
            await wait_for_meta(store, name, "orphaned")
            hits = await searcher(new_app).search([name], "passage number 2", top_k=1)
            with pytest.raises(ChamviValidationError, match="orphaned"):
                await searcher(old_app).search([name], "passage")
    assert hits.matches[0].document == "doc-2"
