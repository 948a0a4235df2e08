"""A run's loop: envelope, tools, tool errors, budgets, structured output, dispatch paths."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from chamvi import App, Budget, ChamviClient, FatalToolError, RunNotFoundError, RunStatus, define_agent, tool
from chamvi import client as client_module
from chamvi._constants import AGENT_RUN_WORKFLOW, KNOWLEDGE_COLLECTION_WORKFLOW, KNOWLEDGE_ID_PREFIX
from chamvi.models import RunSummary, Usage
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, call, reply
from tests.polling import eventually


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@tool
async def give_up() -> str:
    """Fails the whole run."""
    raise FatalToolError("cannot continue without the database")


@tool
async def slow(seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return "slept"


def app_with(model: ScriptedModel, **agent: object) -> App:
    models = ModelRegistry()
    models.register("scripted/test", model)
    definition = {
        "name": "tester",
        "model": "scripted/test",
        "instructions": "Test.",
        "tools": [add],
        **agent,
    }
    return App(agents=[define_agent(**definition)], models=models)  # type: ignore[arg-type]


async def test_trigger_envelope_is_the_first_user_message(chamvi: ChamviClient, running_worker) -> None:
    model = ScriptedModel([reply("ok")])
    async with running_worker(app_with(model)):
        dispatched = await chamvi.dispatch("tester", {"issue": 7}, channel="github", address="issue-7")
        run = await chamvi.wait(dispatched.run_id)
    assert run.status == RunStatus.COMPLETED
    first = model.requests[0].messages[1]
    assert model.requests[0].messages[0].role == "system"
    assert first.role == "user" and first.content is not None
    envelope = json.loads(first.content.split("```json\n", 1)[1].rsplit("\n```", 1)[0])
    assert envelope == {
        "trigger": "manual",
        "channel": "github",
        "address": "issue-7",
        "payload": {"issue": 7},
    }


async def test_tool_errors_go_back_to_the_model_and_the_run_goes_on(
    chamvi: ChamviClient, running_worker
) -> None:
    model = ScriptedModel([call("explode", reason="test"), reply("recovered")])
    async with running_worker(app_with(model, tools=[explode])):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.COMPLETED
    tool_message = model.requests[1].messages[-1]
    assert tool_message.role == "tool" and tool_message.is_error
    assert "boom: test" in (tool_message.content or "")
    assert run.steps[1].error is not None and run.steps[1].error.code == "tool_error"


async def test_fatal_tool_error_fails_the_run(chamvi: ChamviClient, running_worker) -> None:
    async with running_worker(app_with(ScriptedModel([call("give_up")]), tools=[give_up])):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "fatal_tool_error"
    assert "database" in run.error.message


async def test_unknown_tool_and_invalid_input_are_tool_errors(chamvi: ChamviClient, running_worker) -> None:
    model = ScriptedModel([call("nope"), call("add", a="x", b=1), reply("done")])
    async with running_worker(app_with(model)):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.COMPLETED
    errors = [s.error.code for s in run.steps if s.kind == "tool" and s.error]
    assert errors == ["tool_not_allowed", "validation_error"]


async def test_max_steps_settles_budget_exceeded_when_the_model_still_wants_tools(
    chamvi: ChamviClient, running_worker
) -> None:
    model = ScriptedModel([call("add", a=1, b=1)], repeat_last=True)
    async with running_worker(app_with(model, budget=Budget(max_steps=3))):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "budget_exceeded"
    assert len([s for s in run.steps if s.kind == "llm"]) == 3


async def test_a_final_answer_on_the_last_step_completes(chamvi: ChamviClient, running_worker) -> None:
    model = ScriptedModel([call("add", a=1, b=1), reply("two")])
    async with running_worker(app_with(model, budget=Budget(max_steps=2))):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.COMPLETED and run.output == "two"


async def test_max_tokens_settles_budget_exceeded(chamvi: ChamviClient, running_worker) -> None:
    heavy = ScriptedTurn(
        tool_calls=call("add", a=1, b=2).tool_calls, usage=Usage(input_tokens=600, output_tokens=10)
    )
    model = ScriptedModel([heavy, heavy, reply("never")])
    async with running_worker(app_with(model, budget=Budget(max_tokens=1000))):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "budget_exceeded"
    assert run.usage.total_tokens == 1220


async def test_timeout_settles_the_run_timeout(chamvi: ChamviClient, running_worker) -> None:
    model = ScriptedModel([call("slow", seconds=30), reply("late")])
    async with running_worker(app_with(model, tools=[slow], budget=Budget(timeout=timedelta(seconds=1)))):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "timeout"


class Verdict(BaseModel):
    label: str
    confidence: float


async def test_structured_output_is_parsed_and_validated(chamvi: ChamviClient, running_worker) -> None:
    good = ScriptedModel([reply('{"label": "bug", "confidence": 0.9}')])
    async with running_worker(app_with(good, output=Verdict)):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.COMPLETED
    assert run.output == {"label": "bug", "confidence": 0.9}
    assert good.requests[0].output_schema is not None


async def test_a_final_answer_that_does_not_parse_fails_validation_error(
    chamvi: ChamviClient, running_worker
) -> None:
    bad = ScriptedModel([reply("it is a bug " + "x" * 2000)])
    async with running_worker(app_with(bad, output=Verdict)):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "validation_error"
    assert len(run.error.message) < 700
    assert run.steps[0].text is not None and len(run.steps[0].text) > 2000


async def test_an_answer_cut_off_fails_incomplete_response(chamvi: ChamviClient, running_worker) -> None:
    model = ScriptedModel([reply("half an ans", finish_reason="length")])
    async with running_worker(app_with(model)):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "incomplete_response"


async def test_a_run_started_like_the_temporal_cli_runs(
    client: Client, chamvi: ChamviClient, running_worker, task_queue: str
) -> None:
    model = ScriptedModel([call("add", a=20, b=22), reply("42")])
    async with running_worker(app_with(model)):
        # the JSON `temporal workflow start --type AgentRun --input '...'` sends
        handle = await client.start_workflow(
            AGENT_RUN_WORKFLOW,
            {"agent": "tester", "payload": {"q": 1}},
            id="cli-started-run",
            task_queue=task_queue,
        )
        run = await chamvi.wait(handle.id)
    assert run.status == RunStatus.COMPLETED and run.output == "42"


async def test_the_client_acts_on_agent_runs_only_and_leaves_other_workflows_alone(
    client: Client, chamvi: ChamviClient, task_queue: str
) -> None:
    # a collection's workflow, with no worker to run it: only its type tells it from a run
    handle = await client.start_workflow(
        KNOWLEDGE_COLLECTION_WORKFLOW, id=f"{KNOWLEDGE_ID_PREFIX}{uuid.uuid4().hex}", task_queue=task_queue
    )
    attempts: list[Callable[[], Awaitable[object]]] = [
        lambda: chamvi.get_run(handle.id),
        lambda: chamvi.approvals.approve(handle.id),
        lambda: chamvi.approvals.approve(handle.id, approval_id="a"),
        lambda: chamvi.cancel(handle.id),
        lambda: asyncio.wait_for(chamvi.wait(handle.id), timeout=30),
    ]
    try:
        for attempt in attempts:
            with pytest.raises(RunNotFoundError, match=f"^no run {handle.id!r}$"):
                await attempt()
        history = await handle.fetch_history()
    finally:
        await handle.terminate()
    cancel_requested = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED
    assert cancel_requested not in {event.event_type for event in history.events}


async def test_an_unknown_agent_fails_the_run_naming_it(
    client: Client, chamvi: ChamviClient, running_worker, task_queue: str
) -> None:
    async with running_worker(app_with(ScriptedModel([reply("x")]))):
        handle = await client.start_workflow(
            AGENT_RUN_WORKFLOW, {"agent": "nobody"}, id="unknown-agent-run", task_queue=task_queue
        )
        run = await chamvi.wait(handle.id)
    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "agent_not_found"
    assert "'nobody'" in run.error.message and "'tester'" in run.error.message


async def test_status_is_listed_through_search_attributes(chamvi: ChamviClient, running_worker) -> None:
    async with running_worker(app_with(ScriptedModel([reply("x")]))):
        run_id = (await chamvi.dispatch("tester")).run_id
        await chamvi.wait(run_id)

        async def listed_completed() -> list[RunSummary] | None:  # visibility is eventually consistent
            listed = await chamvi.list_runs(agent="tester", status="completed", limit=100)
            return listed if any(r.run_id == run_id for r in listed) else None

        listed = await eventually(listed_completed, f"run {run_id} listed as completed")
    assert any(r.run_id == run_id and r.status == "completed" for r in listed)


async def test_model_requests_carry_the_tools_schema(chamvi: ChamviClient, running_worker) -> None:
    def check(request: ChatRequest) -> ScriptedTurn:
        names = [t.name for t in request.tools]
        return reply(",".join(names) + ":" + ",".join(request.tools[0].parameters["required"]))

    async with running_worker(app_with(ScriptedModel([check]))):
        run = await chamvi.wait((await chamvi.dispatch("tester")).run_id)
    assert run.output == "add:a,b"


async def test_a_completed_run_shows_its_output_when_no_worker_answers_the_query(
    chamvi: ChamviClient, running_worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_worker(app_with(ScriptedModel([reply("the answer")]))):
        run_id = (await chamvi.dispatch("tester")).run_id
        assert (await chamvi.wait(run_id)).output == "the answer"
    monkeypatch.setattr(client_module, "QUERY_TIMEOUT", timedelta(seconds=1))  # no worker polls now
    view = await chamvi.get_run(run_id)
    assert (view.status, view.output, view.steps) == (RunStatus.COMPLETED, "the answer", [])
