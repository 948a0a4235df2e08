"""``ChamviClient.idle()``: no run in progress, over Temporal's visibility and the runs' own state."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, ToolContext, approve, define_agent, tool
from chamvi.errors import IdleTimeoutError
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from tests.polling import eventually

SHORT = timedelta(milliseconds=300)
"""Long enough for one look at the runs; a test never depends on how long it takes."""

gates: dict[str, asyncio.Event] = {}
entered: dict[str, asyncio.Event] = {}


@tool
async def hold(gate: str) -> str:
    """Holds the run until the test opens the gate."""
    entered.setdefault(gate, asyncio.Event()).set()
    await gates.setdefault(gate, asyncio.Event()).wait()
    return "released"


@tool
async def ask(ctx: ToolContext) -> str:
    """Waits for a person."""
    decision = await approve(ctx, title="Go on?")
    return "approved" if decision.approved else "denied"


def app_of(*names: str) -> App:
    models = ModelRegistry()
    models.register("scripted/holder", ScriptedModel([call("hold", gate="g"), reply("done")]))
    models.register("scripted/asker", ScriptedModel([call("ask"), reply("done")]))
    agents = [
        define_agent(name=names[0], model="scripted/holder", instructions="Hold.", tools=[hold]),
        define_agent(name=names[1], model="scripted/asker", instructions="Ask.", tools=[ask]),
    ]
    return App(agents=agents, models=models)


@pytest.fixture(autouse=True)
def _gates() -> None:
    gates.clear()
    entered.clear()


async def test_idle_waits_for_a_run_dispatched_a_moment_ago_and_returns_once_it_settled(
    chamvi: ChamviClient, running_worker
) -> None:
    app = app_of("holder", "asker")
    async with running_worker(app):
        run_id = (await chamvi.dispatch("holder")).run_id
        # at once, before the visibility list may show it: the run is still queued or running
        with pytest.raises(IdleTimeoutError, match=rf"'{run_id}' \((queued|running)\)"):
            await chamvi.idle(timeout=SHORT)
        await entered.setdefault("g", asyncio.Event()).wait()
        with pytest.raises(IdleTimeoutError, match=r"runs of agent 'holder' still in progress"):
            await chamvi.idle("holder", timeout=SHORT)
        await chamvi.idle("asker", timeout=SHORT)  # another agent's runs do not count
        gates.setdefault("g", asyncio.Event()).set()
        await chamvi.idle()
        assert (await chamvi.get_run(run_id)).status == RunStatus.COMPLETED


async def test_a_run_waiting_for_a_person_has_freed_its_slot_and_does_not_keep_idle_waiting(
    chamvi: ChamviClient, running_worker
) -> None:
    async with running_worker(app_of("holder", "asker")):
        run_id = (await chamvi.dispatch("asker")).run_id

        async def waiting() -> bool | None:
            return True if (await chamvi.get_run(run_id)).status == RunStatus.WAITING else None

        await eventually(waiting, "the run waiting for its approval")
        await chamvi.idle()
        await chamvi.approvals.approve(run_id)
        await chamvi.idle()
        assert (await chamvi.get_run(run_id)).status == RunStatus.COMPLETED


async def test_idle_sees_the_runs_other_processes_started_through_the_visibility_list(
    client: Client, task_queue: str, chamvi: ChamviClient, running_worker
) -> None:
    elsewhere = ChamviClient(client, task_queue=task_queue)  # another process's client
    async with running_worker(app_of("holder", "asker")):
        run_id = (await elsewhere.dispatch("holder")).run_id
        await entered.setdefault("g", asyncio.Event()).wait()

        async def listed() -> bool | None:
            running = await chamvi.list_runs(agent="holder", status="running")
            return True if run_id in [r.run_id for r in running] else None

        await eventually(listed, "the run in the visibility list")
        with pytest.raises(IdleTimeoutError, match=run_id):
            await chamvi.idle(timeout=SHORT)
        gates.setdefault("g", asyncio.Event()).set()
        await chamvi.idle()
        assert (await chamvi.get_run(run_id)).status == RunStatus.COMPLETED
