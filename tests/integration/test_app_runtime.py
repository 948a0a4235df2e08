"""The App is a definition: what a worker holds while it serves it is its plugin's runtime alone."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from temporalio.client import Client

from chamvi import App, ChamviClient, RunEvent, RunStatus, Tool, ToolFactoryContext, define_agent, tool
from chamvi.knowledge.search import KNOWLEDGE_SEARCH
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker, local_plugin
from chamvi.state import STATE_STORE
from tests.polling import eventually

built: list[tuple[str, str]] = []


@tool
async def lookup(order_id: str) -> str:
    """Looks an order up."""
    return f"order {order_id}"


def by_run(ctx: ToolFactoryContext) -> Sequence[Tool]:
    built.append((ctx.run.run_id, ctx.run.trigger.channel or ""))
    return [lookup]


async def test_two_workers_built_from_one_app_share_nothing_by_accident(client: Client) -> None:
    built.clear()
    models = ModelRegistry()
    turns = [call("lookup", order_id="A1"), reply("done")]
    models.register("scripted/desk", ScriptedModel(turns * 2))
    agent = define_agent(name="desk", model="scripted/desk", instructions="x", tools=by_run)
    app = App(agents=[agent], models=models)
    heard: list[RunEvent] = []
    app.on("run.completed", heard.append)  # a declaration: both workers call it
    first, second = local_plugin(app), local_plugin(app)
    queues = [f"test-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    async with (
        build_worker(client, first, task_queue=queues[0]),
        build_worker(client, second, task_queue=queues[1]),
    ):
        views = []
        for queue in queues:  # one after the other: the scripted model's turns are shared
            chamvi = ChamviClient(client, task_queue=queue)
            views.append(await chamvi.wait((await chamvi.dispatch("desk", {})).run_id))

        async def both_heard() -> bool | None:
            return True if len(heard) == 2 else None

        await eventually(both_heard, "each worker's event hub calling the App's listener")

    assert [v.status for v in views] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert sorted(e.run_id for e in heard) == sorted(v.run_id for v in views)
    # each worker built its own run's tools once, into its own cache
    assert sorted(run_id for run_id, _ in built) == sorted(v.run_id for v in views)
    assert first.runtime.events is not second.runtime.events
    assert first.runtime.search is not None and second.runtime.search is not None
    assert first.runtime.search is not second.runtime.search
    assert first.runtime.state is not second.runtime.state
    assert first.runtime.provided.get(STATE_STORE) is first.runtime.state
    # and nothing of either worker was written into the App
    assert app.provided.get(KNOWLEDGE_SEARCH) is None and app.provided.get(STATE_STORE) is None
    assert not hasattr(app, "events") and not hasattr(app, "_tool_sets")
