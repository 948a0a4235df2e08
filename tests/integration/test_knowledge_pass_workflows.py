"""Passes you can see: each pass is a ``KnowledgePass`` workflow, a child of its collection's workflow."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from chamvi.activities.knowledge import KnowledgeActivities
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from chamvi import App, ChamviClient
from chamvi._constants import (
    KNOWLEDGE_ID_PREFIX,
    KNOWLEDGE_PASS_WORKFLOW,
    MEMO_KNOWLEDGE_PASS_COLLECTION,
    MEMO_KNOWLEDGE_PASS_GENERATION,
    MEMO_KNOWLEDGE_PASS_STATS,
)
from chamvi.cli.knowledge import _pass_progress
from chamvi.errors import KnowledgePassError
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.indexing import Indexer
from chamvi.knowledge.search import KnowledgeSearch
from chamvi.models.knowledge import CollectionState, PassRequest, PassResult, PassStats
from tests.knowledge_helpers import (
    CountingEmbedder,
    collection_state,
    knowledge_worker,
    knowledge_worker_before_pass_workflows,
    new_store,
    pass_workflows,
    reader_app,
    wait_for_meta,
    wait_for_passes,
)
from tests.polling import eventually


@pytest.fixture
def name() -> str:
    return f"passes-{uuid.uuid4().hex[:8]}"


def app_for(name: str, embedder: CountingEmbedder, failing: list[bool] | None = None) -> App:
    """One collection of three documents; each True popped from ``failing`` fails that pass."""

    async def documents() -> AsyncIterator[dict[str, str]]:
        if failing and failing.pop(0):
            raise RuntimeError("page 1 answered 503")
        for i in range(3):
            yield {"id": f"doc-{i}", "content": f"Passage number {i}."}

    collection = knowledge_collection(name, model=embedder.ref, sources=[define_source(documents=documents)])
    return reader_app(collection, embedder)


async def listed(client: Client, name: str, count: int) -> list[WorkflowExecution]:
    """The collection's pass workflows once ``count`` of them are listed and closed."""

    async def probe() -> list[WorkflowExecution] | None:
        found = await pass_workflows(client, name)
        closed = [e for e in found if e.status != WorkflowExecutionStatus.RUNNING]
        return found if len(found) == count and len(closed) == count else None

    return await eventually(probe, f"{count} closed pass workflows of {name!r} listed")


async def test_each_pass_is_a_child_workflow_listed_with_its_collection_summary_and_counts(
    client: Client, task_queue: str, name: str
) -> None:
    store, embedder = new_store(), CountingEmbedder()
    async with knowledge_worker(client, app_for(name, embedder), store, task_queue):
        await wait_for_meta(store, name, "ready")
        await ChamviClient(client, task_queue=task_queue).knowledge.sync(name)
        state = await wait_for_passes(client, name, 2)
    first, second = await listed(client, name, 2)
    collection = await client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name).describe()
    chain = collection.raw_description.workflow_execution_info.first_run_id[:8]
    assert [first.id, second.id] == [f"knowledge-pass:{name}:{chain}:1", f"knowledge-pass:{name}:{chain}:2"]
    assert state.pass_id == second.id
    assert {first.workflow_type, second.workflow_type} == {KNOWLEDGE_PASS_WORKFLOW}
    assert {first.status, second.status} == {WorkflowExecutionStatus.COMPLETED}

    described = await client.get_workflow_handle(first.id).describe()
    assert described.parent_id == KNOWLEDGE_ID_PREFIX + name
    assert await described.static_summary() == f"pass 1 over {name}"
    memo = await described.memo()
    assert memo[MEMO_KNOWLEDGE_PASS_COLLECTION] == name
    assert memo[MEMO_KNOWLEDGE_PASS_GENERATION] == 1
    assert (memo[MEMO_KNOWLEDGE_PASS_STATS]["read"], memo[MEMO_KNOWLEDGE_PASS_STATS]["embedded"]) == (3, 3)

    result = await client.get_workflow_handle(second.id, result_type=PassResult).result()
    assert (result.stats.read, result.stats.unchanged, result.stats.embedded) == (3, 3, 0)
    assert result.meta.generation == 1 and result.meta.documents == 3


async def test_a_failed_pass_fails_its_workflow_and_the_collection_backs_off_to_the_next(
    client: Client, task_queue: str, name: str
) -> None:
    store, embedder = new_store(), CountingEmbedder()
    async with knowledge_worker(client, app_for(name, embedder, failing=[True]), store, task_queue):
        await wait_for_meta(store, name, "ready")  # after the 5 s backoff

        async def second_pass_counted() -> CollectionState | None:
            # the pass writes the ready generation before its workflow's end reaches the collection
            state = await collection_state(client, name)
            return state if state.passes == 2 else None

        state = await eventually(second_pass_counted, "the collection counting its second pass")
    assert (state.passes, state.failures, state.error) == (2, 0, None)
    failed, passed = await listed(client, name, 2)
    assert failed.status == WorkflowExecutionStatus.FAILED
    assert passed.status == WorkflowExecutionStatus.COMPLETED
    with pytest.raises(WorkflowFailureError) as raised:
        await client.get_workflow_handle(failed.id).result()
    cause = raised.value.cause
    assert isinstance(cause, ApplicationError)
    assert (cause.type, cause.message) == ("knowledge_pass_failed", "RuntimeError: page 1 answered 503")


async def test_a_failed_pass_stores_the_next_attempt_its_collection_workflow_decided(name: str) -> None:
    """The backoff is decided once, by the collection's workflow: the pass stores the delay it is given
    (here 4 minutes after a first failure, where the seed's backoff would say 5 s)."""
    store, embedder = new_store(), CountingEmbedder()
    app = app_for(name, embedder, failing=[True])
    search = KnowledgeSearch(store, app.embedders)
    activities = KnowledgeActivities(app, store, Indexer(store, app.embedders), search)
    started = datetime.now(UTC)
    with pytest.raises(KnowledgePassError):
        await ActivityEnvironment().run(
            activities.knowledge_pass, PassRequest(name=name, failures=0, retry_in=timedelta(minutes=4))
        )
    meta = await store.meta(name)
    assert meta is not None and meta.error == "RuntimeError: page 1 answered 503"
    assert meta.next_attempt is not None and meta.next_attempt >= started + timedelta(minutes=4)


async def test_a_collection_that_made_its_passes_as_activities_moves_over_keeping_its_generation(
    client: Client, task_queue: str, name: str
) -> None:
    store, embedder = new_store(), CountingEmbedder()
    app = app_for(name, embedder)
    async with knowledge_worker_before_pass_workflows(client, app, store, task_queue):
        await wait_for_meta(store, name, "ready")
        before = await client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name).describe()
    assert await pass_workflows(client, name) == []  # the pass was an activity of the collection's
    calls = embedder.calls

    async with knowledge_worker(client, app, store, task_queue):  # its start request asks for a pass
        (moved,) = await listed(client, name, 1)
        state = await collection_state(client, name)
    after = await client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + name).describe()
    assert after.run_id != before.run_id  # continued as new before its first pass as a workflow
    chain = before.raw_description.workflow_execution_info.first_run_id[:8]
    assert moved.id == f"knowledge-pass:{name}:{chain}:2"  # the chain's second pass
    assert moved.status == WorkflowExecutionStatus.COMPLETED
    assert state.meta is not None and (state.meta.generation, state.meta.next_generation) == (1, 2)
    assert embedder.calls == calls  # nothing embedded again


async def test_the_running_pass_reports_its_counts_through_its_own_workflows_activity(
    client: Client, task_queue: str, name: str
) -> None:
    store, embedder = new_store(), CountingEmbedder(gate=asyncio.Event())
    async with knowledge_worker(client, app_for(name, embedder), store, task_queue):
        await eventually(embedder.embedding, "the pass embedding")

        async def progress() -> PassStats | None:
            return await _pass_progress(client, name)  # what `chamvi knowledge sync --wait` shows

        stats = await eventually(progress, "the running pass's heartbeat")
        assert embedder.gate is not None
        embedder.gate.set()
        await wait_for_meta(store, name, "ready")
    assert isinstance(stats, PassStats) and stats.embedded == 0  # reported before the gate opened
