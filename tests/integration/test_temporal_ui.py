"""The Temporal UI's own page of a run shows its status and, while it waits, the approval's question.

The UI reads the static summary and details from the server's description of the workflow and the
current details through the SDK's built-in metadata query: the test reads both the same way.
"""

from __future__ import annotations

from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from chamvi import App, ChamviClient, Invoker, RunStatus, ToolContext, approve, define_agent, tool
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.polling import until_status

METADATA_QUERY = "__temporal_workflow_metadata"
"""The query the Temporal UI runs for a workflow's page; the SDK answers it without workflow code."""


@tool
async def refund(amount: int, ctx: ToolContext) -> str:
    """Refunds a customer after a person approves."""
    decision = await approve(ctx, title=f"Refund {amount} EUR?", body="Order 1042\nlate delivery")
    return "refunded" if decision.approved else f"not refunded: {decision.reason}"


def make_app() -> App:
    models = ModelRegistry()
    models.register("scripted/refunder", ScriptedModel([call("refund", "call-1", amount=40), reply("done")]))
    return App(
        agents=[
            define_agent(name="refunder", model="scripted/refunder", instructions="Refund.", tools=[refund])
        ],
        models=models,
    )


async def current_details(client: Client, run_id: str) -> str:
    metadata = await client.get_workflow_handle(run_id).query(METADATA_QUERY, result_type=WorkflowMetadata)
    return metadata.current_details


async def timer_summaries(client: Client, run_id: str) -> list[str]:
    """The one-line summaries of the run's timers, as the UI's timeline shows them."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    converter = client.data_converter.payload_converter
    return [
        converter.from_payload(event.user_metadata.summary, str)
        for event in history.events
        if event.HasField("timer_started_event_attributes") and event.user_metadata.HasField("summary")
    ]


async def test_a_runs_page_shows_who_started_it_and_its_status_and_the_question_while_it_waits(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(make_app()):
        run_id = (
            await chamvi.dispatch(
                "refunder", trigger="http", invoker=Invoker(id="ops-7", kind="token", name="Ops")
            )
        ).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        description = await client.get_workflow_handle(run_id).describe()
        waiting = await current_details(client, run_id)
        await chamvi.approvals.approve(run_id, approved=False, reason="already refunded")
        await chamvi.wait(run_id)
        settled = await current_details(client, run_id)
        timers = await timer_summaries(client, run_id)
    assert await description.static_summary() == "refunder (http)"
    details = await description.static_details() or ""
    assert "**Agent:** `refunder`" in details and "**Invoker:** Ops `ops-7` (token)" in details
    assert f"`chamvi runs show {run_id}`" in details
    assert "**Status:** waiting" in waiting
    assert "**Waiting for approval:** Refund 40 EUR?" in waiting
    assert "> Order 1042\n> late delivery" in waiting
    assert "**Tool:** `refund` (step 0)" in waiting and "**Approval id:** `0:call-1:0`" in waiting
    assert "**Deadline:** " in waiting and f"`chamvi approve {run_id}`" in waiting
    assert "**Status:** completed" in settled and "Waiting for approval" not in settled
    assert "approval 0:call-1:0: Refund 40 EUR?" in timers  # the timeline shows the question too
    assert "**Steps:** 4" in settled  # the model call, the wait, the tool call, the answer


async def test_a_failed_runs_page_shows_its_error(
    client: Client, chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(make_app()):
        run_id = (await chamvi.dispatch("nobody-serves-this")).run_id
        run = await chamvi.wait(run_id)
        settled = await current_details(client, run_id)
    assert run.status == RunStatus.FAILED and run.error is not None
    assert "**Status:** failed" in settled
    assert f"**Error:** `{run.error.code}`" in settled
