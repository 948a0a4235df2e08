"""Models given as provider objects, not refs: the workflow sees the refs the App registers them under."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, define_agent, define_source, knowledge_collection
from chamvi.errors import InvalidAgentDefinitionError, InvalidAppError
from chamvi.knowledge.embedders.hashing import HashEmbedder
from chamvi.providers import ScriptedModel, reply
from tests.conftest import RunningWorker
from tests.knowledge_helpers import CountingEmbedder, knowledge_worker, new_store, searcher, wait_for_passes


async def test_agents_run_on_chat_model_objects_known_by_refs_the_app_gives_them(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    default, own, other = (
        ScriptedModel([reply("by default")]),
        ScriptedModel([reply("mine")]),
        ScriptedModel([]),
    )
    app = App(
        agents=[
            define_agent(name="plain", instructions="x"),
            define_agent(name="own", instructions="x", model=own),
            define_agent(name="shares", instructions="x", model=own),
            define_agent(name="other", instructions="x", model=other),
        ],
        model=default,
    )
    assert [app.spec(n).model for n in ("plain", "own", "shares", "other")] == [
        "object/scripted-model",
        "object/scripted-model-2",
        "object/scripted-model-2",  # one object, one ref
        "object/scripted-model-3",
    ]
    async with running_worker(app):
        runs = [await chamvi.wait((await chamvi.dispatch(n, {})).run_id) for n in ("plain", "own")]
    assert [(r.status, r.output) for r in runs] == [
        (RunStatus.COMPLETED, "by default"),
        (RunStatus.COMPLETED, "mine"),
    ]


def test_a_model_that_is_neither_a_ref_nor_a_model_object_is_refused_naming_both_forms() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="string or a chat model object"):
        define_agent(name="a", instructions="x", model=42)  # type: ignore[arg-type]
    with pytest.raises(InvalidAppError, match="string or a chat model object"):
        App(agents=[], model=42)  # type: ignore[arg-type]


def test_an_embedding_object_is_known_by_its_own_ref_which_must_be_unique_and_a_provider_ref() -> None:
    embedder = HashEmbedder(64)
    source = define_source(documents=_none)
    app = App(
        agents=[],
        embedding_model=embedder,
        collections=[knowledge_collection("docs", model=embedder, sources=[source])],
    )
    assert app.embedding_model == app.collections["docs"].model == "test/hash-64"
    assert app.embedders.resolve("test/hash-64") is embedder
    with pytest.raises(InvalidAppError, match="two embedding model objects have the ref 'test/hash-64'"):
        App(
            agents=[],
            embedding_model=HashEmbedder(64),
            collections=[knowledge_collection("docs", model=embedder, sources=[source])],
        )
    nameless = CountingEmbedder(ref="counting")
    with pytest.raises(InvalidAgentDefinitionError, match="embedding model object whose ref is one"):
        knowledge_collection("docs", model=nameless, sources=[source])


async def _none() -> AsyncIterator[dict[str, str]]:
    for document_id, content in {"refunds": "Refunds are paid within 14 days."}.items():
        yield {"id": document_id, "content": content}


async def test_a_collection_embedded_by_an_object_is_indexed_and_searched_through_it(
    client: Client, task_queue: str
) -> None:
    name = f"obj-{uuid.uuid4().hex[:8]}"
    embedder = CountingEmbedder()
    app = App(
        agents=[],
        collections=[knowledge_collection(name, model=embedder, sources=[define_source(documents=_none)])],
    )
    async with knowledge_worker(client, app, new_store(), task_queue):
        state = await wait_for_passes(client, name, 1)
        hits = await searcher(app).search([name], "when are refunds paid", top_k=1)
    assert state.meta is not None and state.meta.model == "test/counting"
    assert [m.document for m in hits.matches] == ["refunds"]
    assert embedder.calls >= 2  # the pass and the query went through the object
