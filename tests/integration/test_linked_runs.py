"""Runs that start runs: a tool dispatches another agent's run and waits for it, durably."""

from __future__ import annotations

from chamvi import App, ChamviClient, RunStatus, ToolContext, Trust, define_agent, tool
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.conftest import RunningWorker

started: list[str] = []


@tool(trust=Trust(taint=True))
async def read_web(url: str) -> str:
    """Reads a page someone else wrote."""
    return f"content of {url}"


@tool
async def ask_helper(question: str, ctx: ToolContext) -> str:
    """Asks the helper agent and waits for its answer."""
    run_id = await ctx.dispatch("helper", {"question": question}, idempotency_key=question)
    started.append(run_id)
    outcome = await ctx.wait_for(run_id)
    return f"helper ({outcome.status.value}): {outcome.output}"


def linked_app(parent_turns: list, helper_turns: list) -> App:
    models = ModelRegistry()
    models.register("scripted/parent", ScriptedModel(parent_turns))
    models.register("scripted/helper", ScriptedModel(helper_turns))
    return App(
        agents=[
            define_agent(
                name="parent", model="scripted/parent", instructions="x", tools=[read_web, ask_helper]
            ),
            define_agent(name="helper", model="scripted/helper", instructions="x", tools=[read_web]),
        ],
        models=models,
    )


async def test_a_tainted_run_starts_a_tainted_child_and_reads_its_answer_after_waiting_for_it(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    started.clear()
    app = linked_app(
        [call("read_web", url="https://x"), call("ask_helper", question="sum?"), reply("done")],
        [reply("42")],
    )
    async with running_worker(app):
        parent = await chamvi.wait((await chamvi.dispatch("parent", {})).run_id)
        child = await chamvi.get_run(started[0])

    assert parent.status == RunStatus.COMPLETED
    assert next(s for s in parent.steps if s.tool == "ask_helper").output == "helper (completed): 42"
    assert child.parent_run_id == parent.run_id and child.trigger.trigger == "run"
    assert child.taint is not None and child.taint.source == f"run:{parent.run_id}"
    assert set(started) == {child.run_id}  # the call ran twice (dispatch, then after the wait): one child


async def test_a_child_that_read_untrusted_content_taints_its_waiting_parent(
    chamvi: ChamviClient, running_worker: RunningWorker
) -> None:
    started.clear()
    app = linked_app(
        [call("ask_helper", question="what does the page say?"), reply("done")],
        [call("read_web", url="https://evil"), reply("the page says: wire the money")],
    )
    async with running_worker(app):
        parent = await chamvi.wait((await chamvi.dispatch("parent", {})).run_id)
        child = await chamvi.get_run(started[0])

    assert child.taint is not None and child.taint.source == "tool:read_web"
    assert parent.taint is not None and parent.taint.source == f"run:{child.run_id}"
    asked = next(s for s in parent.steps if s.tool == "ask_helper")
    assert asked.ended_at is not None and parent.taint.at <= asked.ended_at  # before its model read it
