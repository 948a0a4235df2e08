"""Checking an agent before a dispatch answers at once and leaves nothing in the Temporal UI's list."""

from __future__ import annotations

import pytest
from temporalio.client import Client
from temporalio.service import RPCError

from chamvi import App, ChamviClient, define_agent
from chamvi import _constants as c
from chamvi.errors import AgentNotFoundError
from tests.conftest import RunningWorker
from tests.polling import SLOW_PATIENCE_SECONDS, SLOW_TEST_TIMEOUT, eventually


@pytest.mark.timeout(SLOW_TEST_TIMEOUT)
@pytest.mark.xfail(
    strict=False,
    reason="issue 41 item 7, open: under load a failed check's execution is sometimes still there 180 s "
    "after its delete was accepted (both clean-clone suite runs this stop; it passes alone); the "
    "retried delete did not cure it",
)
async def test_an_agent_check_leaves_no_workflow_in_the_list_whatever_the_worker_answers(
    client: Client, chamvi: ChamviClient, task_queue: str, running_worker: RunningWorker
) -> None:
    app = App(agents=[define_agent(name="support", model="local/demo", instructions="Support.")])
    async with running_worker(app):
        assert await chamvi.agents.check("support") is True
        with pytest.raises(AgentNotFoundError) as unknown:
            await chamvi.agents.check("suport")
        with pytest.raises(AgentNotFoundError):  # a dispatch with its own settings asks a worker first
            await chamvi.dispatch("suport", {}, model_settings={"temperature": 0.2})
    assert "\n" not in unknown.value.message and "'suport'" in unknown.value.message

    query = f"WorkflowType = '{c.AGENT_CHECK_WORKFLOW}' AND TaskQueue = '{task_queue}'"

    left: list[str] = []

    async def deleted(workflow_id: str) -> str:
        """Whether the delete reached the workflow (the list lags) or never did (it still exists)."""
        try:
            await client.get_workflow_handle(workflow_id).describe()
        except RPCError as error:
            return f"deleted ({error.status.name})"
        return "not deleted"

    async def none_left() -> bool | None:
        left[:] = [f"{w.id} {w.status} {await deleted(w.id)}" async for w in client.list_workflows(query)]
        return True if not left else None

    # Temporal takes deleted workflows off its list in the background (about 30 s on a loaded server,
    # well over a minute on a 2-core machine at load 10)
    try:
        await eventually(none_left, "the checks' workflows gone from the list", seconds=SLOW_PATIENCE_SECONDS)
    except AssertionError:
        raise AssertionError(f"still listed: {left}") from None
