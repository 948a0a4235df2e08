"""A real OpenAI-compatible embedding server on loopback answering 429/500/400 during passes; search
options; the resync Schedules of older workers deleted; boot checks; history that stays small
whatever the source's size."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
)
from temporalio.service import RPCError, RPCStatusCode

from chamvi import App, InvalidAgentDefinitionError, define_agent
from chamvi._constants import KNOWLEDGE_ID_PREFIX, KNOWLEDGE_SCHEDULE_PREFIX, KNOWLEDGE_SYNC_REQUEST_WORKFLOW
from chamvi.errors import ChamviValidationError, InvalidAppError, KnowledgeNotReadyError
from chamvi.knowledge import define_source, folder, knowledge_collection, knowledge_tools
from chamvi.knowledge.embedders import EmbeddingRegistry
from chamvi.knowledge.embedders.openai import OpenAIEmbeddingProvider
from chamvi.knowledge.search import MAX_CHARS
from chamvi.knowledge.sources import CustomSource
from chamvi.models.knowledge import SyncRequest
from tests.knowledge_helpers import CountingEmbedder, knowledge_worker, new_store, searcher, wait_for_passes
from tests.support.embedding_server import EmbeddingServer, error, hashed, rate_limited


@pytest.fixture
def name() -> str:
    return f"prov-{uuid.uuid4().hex[:8]}"


def source_of(documents: dict[str, str], **options: Any) -> CustomSource:
    async def read() -> AsyncIterator[dict[str, str]]:
        for document_id, content in documents.items():
            yield {"id": document_id, "content": content}

    return define_source(documents=read, **options)


def app_over(name: str, sources: list, model: str, embedders: EmbeddingRegistry, **options: object) -> App:
    return App(
        agents=[
            define_agent(
                name="reader", model="local/demo", instructions="x", tools=knowledge_tools(collections=[name])
            )
        ],
        embedders=embedders,
        collections=[knowledge_collection(name, model=model, sources=sources, **options)],  # type: ignore[arg-type]
    )


def openai_embedders(server: EmbeddingServer) -> EmbeddingRegistry:
    provider = OpenAIEmbeddingProvider(api_key="test", base_url=server.url + "/v1")
    return EmbeddingRegistry(providers={"openai": provider.embedder})


async def test_a_provider_that_refuses_one_document_fails_that_document_alone(
    client: Client, task_queue: str, name: str
) -> None:
    with EmbeddingServer() as server:
        # the batch is refused (400), then each document alone: the second one is the culprit
        server.add(error(400, "input too long"), hashed(64), error(400, "input too long"), hashed(64))
        store = new_store()
        documents = {"a": "Short and fine.", "b": "Too long for the provider.", "c": "Also fine."}
        app = app_over(
            name, [source_of(documents)], "openai/text-embedding-3-small", openai_embedders(server)
        )
        async with knowledge_worker(client, app, store, task_queue):
            state = await wait_for_passes(client, name, 1)
        failed = await store.entry(name, "b")
        fine = await store.entry(name, "c")
    assert state.error is None and state.meta is not None and state.meta.status == "ready"
    assert state.meta.last_stats is not None and state.meta.last_stats.failed == 1
    assert failed is not None and failed.status == "failed" and "input too long" in (failed.error or "")
    assert fine is not None and fine.status == "ready"


async def test_a_rate_limit_slows_the_pass_a_failing_provider_fails_it_and_the_backoff_retries_it(
    client: Client, task_queue: str, name: str
) -> None:
    with EmbeddingServer() as server:
        server.add(rate_limited("1"), error(500, "overloaded"), error(500, "overloaded"), hashed(64))
        store = new_store()
        app = app_over(
            name,
            [source_of({"a": "Refund policy text."})],
            "openai/text-embedding-3-small",
            openai_embedders(server),
        )
        async with knowledge_worker(client, app, store, task_queue):
            # the 429 is waited out within the pass (issue 28); the 500 after it fails the pass
            first = await wait_for_passes(client, name, 1)
            assert first.error is not None and "500" in first.error and first.failures == 1
            second = await wait_for_passes(client, name, 2)
            assert second.error is not None and "500" in second.error and second.failures == 2
            assert second.next_attempt is not None and first.next_attempt is not None
            done = await wait_for_passes(client, name, 3)
        requests = server.requests
    assert done.error is None and done.meta is not None and done.meta.documents == 1
    assert len(requests) == 4
    gaps = [(b.at - a.at) for a, b in itertools.pairwise(requests)]
    assert gaps[0] >= 0.9  # the provider's retry-after
    assert gaps[1] >= 4.5 and gaps[2] >= 9.5  # 5 s, then 10 s: the backoff doubles


async def test_search_options_are_enforced(client: Client, task_queue: str, name: str) -> None:
    documents = {f"d{i}": f"Passage {i} about refunds. " + "word " * 300 for i in range(30)}
    store = new_store()
    embedder = CountingEmbedder()
    registry = EmbeddingRegistry()
    registry.register(embedder.ref, embedder)
    app = app_over(name, [source_of(documents)], embedder.ref, registry)
    async with knowledge_worker(client, app, store, task_queue):
        await wait_for_passes(client, name, 1)
        search = searcher(app)
        top = await search.search([name], "refunds", top_k=20)
        strict = await search.search([name], "refunds", top_k=5, min_score=0.99)
        with pytest.raises(KnowledgeNotReadyError, match='"nothing-here" is not ready'):
            await search.search(["nothing-here"], "refunds")
        with pytest.raises(ChamviValidationError, match="empty"):
            await search.search([name], "  ")
    assert len(top.matches) < 20 and top.truncated
    assert sum(len(m.text) for m in top.matches) <= MAX_CHARS
    assert [m.score for m in top.matches] == sorted((m.score for m in top.matches), reverse=True)
    assert strict.matches == [] and not strict.truncated


def test_knowledge_tools_check_their_options_when_called() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="non-empty list"):
        knowledge_tools(collections=[])
    with pytest.raises(InvalidAgentDefinitionError, match="top_k"):
        knowledge_tools(collections=["a"], top_k=21)
    with pytest.raises(InvalidAgentDefinitionError, match="min_score"):
        knowledge_tools(collections=["a"], min_score=2)
    (tool,) = knowledge_tools(collections=["handbook"])
    assert tool.name == "knowledge_search"
    assert "not instructions" in tool.description
    assert set(tool.json_schema()["properties"]) == {"query", "collection", "top_k"}


async def test_a_search_naming_a_collection_the_agent_does_not_have_is_refused_without_searching(
    client: Client, task_queue: str, name: str
) -> None:
    from chamvi import ChamviClient
    from chamvi.providers import ModelRegistry, ScriptedModel, call, reply

    models = ModelRegistry()
    models.register(
        "scripted/x", ScriptedModel([call("knowledge_search", query="q", collection="secret"), reply("ok")])
    )
    app = App(
        agents=[
            define_agent(
                name="reader", model="scripted/x", instructions="x", tools=knowledge_tools(collections=[name])
            )
        ],
        models=models,
    )
    chamvi = ChamviClient(client, task_queue=task_queue)
    async with knowledge_worker(client, app, new_store(), task_queue):
        run = await chamvi.wait((await chamvi.dispatch("reader")).run_id)
    error_info = next(s for s in run.steps if s.kind == "tool").error
    assert error_info is not None and "'secret' is not searchable here" in error_info.message


async def test_a_worker_deletes_the_fixed_clock_resync_schedule_an_older_worker_kept(
    client: Client, task_queue: str, tmp_path: Path, name: str
) -> None:
    (tmp_path / "a.md").write_text("# A\n\ntext")
    embedder = CountingEmbedder()
    registry = EmbeddingRegistry()
    registry.register(embedder.ref, embedder)
    app = app_over(name, [folder(tmp_path)], embedder.ref, registry, resync=timedelta(minutes=10))
    schedule = client.get_schedule_handle(KNOWLEDGE_SCHEDULE_PREFIX + name)
    await client.create_schedule(  # what workers made before the collection's workflow kept the timer
        schedule.id,
        Schedule(
            action=ScheduleActionStartWorkflow(
                KNOWLEDGE_SYNC_REQUEST_WORKFLOW,
                SyncRequest(name=name),
                id=f"sync-{name}",
                task_queue=task_queue,
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(minutes=10))]),
        ),
    )
    async with knowledge_worker(client, app, new_store(), task_queue):
        state = await wait_for_passes(client, name, 1)
        with pytest.raises(RPCError) as gone:
            await schedule.describe()
    assert gone.value.status == RPCStatusCode.NOT_FOUND
    assert state.last_success is not None and state.next_resync == state.last_success + timedelta(minutes=10)


def test_resync_below_one_minute_is_refused() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="at least one minute"):
        knowledge_collection("x", model="test/hash-8", sources=[source_of({})], resync=timedelta(seconds=30))


def test_the_boot_fails_for_each_bad_declaration(tmp_path: Path) -> None:
    def check_fails() -> None:
        raise InvalidAgentDefinitionError("the API token is missing")

    source = source_of({})
    with pytest.raises(InvalidAppError, match="'docs' is declared twice"):
        App(agents=[], collections=[knowledge_collection("docs", model="test/hash-8", sources=[source])] * 2)
    with pytest.raises(InvalidAppError, match="'nowhere/model' does not resolve"):
        App(agents=[], collections=[knowledge_collection("docs", model="nowhere/model", sources=[source])])
    with pytest.raises(InvalidAgentDefinitionError, match="is not a directory"):
        App(
            agents=[],
            collections=[
                knowledge_collection("docs", model="test/hash-8", sources=[folder(tmp_path / "missing")])
            ],
        )
    with pytest.raises(InvalidAgentDefinitionError, match="the API token is missing"):
        App(
            agents=[],
            collections=[
                knowledge_collection(
                    "docs",
                    model="test/hash-8",
                    sources=[define_source(documents=source.documents, check=check_fails)],
                )
            ],
        )


async def test_a_pass_over_many_documents_keeps_them_out_of_history(
    client: Client, task_queue: str, name: str
) -> None:
    documents = {f"doc-{i}": f"Document {i}: " + "text " * 40 for i in range(2000)}
    registry = EmbeddingRegistry()
    app = app_over(name, [source_of(documents)], "test/hash-16", registry)
    async with knowledge_worker(client, app, new_store(), task_queue):
        state = await wait_for_passes(client, name, 1)
        history = await client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name).fetch_history()
    assert state.meta is not None and state.meta.documents == 2000
    source_bytes = sum(len(v) for v in documents.values())
    assert len(history.to_json()) < source_bytes / 20  # counts travel, documents never do
