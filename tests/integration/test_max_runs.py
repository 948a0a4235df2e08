"""The per-worker cap on runs executing at once (the seed's ``concurrencyMaxRuns``), counted, not timed."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest
from temporalio.client import Client

from chamvi import App, ChamviClient, ChamviPlugin, RunStatus, ToolContext, approve, define_agent, tool
from chamvi._lifecycle import memory_index
from chamvi.artifacts import ArtifactStore
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from tests.polling import eventually


class Floor:
    """Who is inside a tool call now, and the most runs and calls that were at once."""

    def __init__(self) -> None:
        self.inside: dict[str, int] = {}
        self.entered: list[str] = []
        self.gates: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.peak_runs = 0
        self.peak_calls = 0

    async def hold(self, run_id: str) -> None:
        self.inside[run_id] = self.inside.get(run_id, 0) + 1
        self.entered.append(run_id)
        self.peak_runs = max(self.peak_runs, len(self.inside))
        self.peak_calls = max(self.peak_calls, sum(self.inside.values()))
        try:
            await self.gates[run_id].wait()
        finally:
            self.inside[run_id] -= 1
            if not self.inside[run_id]:
                del self.inside[run_id]


floor = Floor()


@pytest.fixture(autouse=True)
def _fresh_floor() -> None:
    global floor
    floor = Floor()


@tool
async def hold(part: int, ctx: ToolContext) -> str:
    """Stays in the call until the test lets the run go on."""
    await floor.hold(ctx.run.run_id)
    return f"part {part} done"


@tool
async def ask(ctx: ToolContext) -> str:
    """Waits for a person."""
    return "approved" if (await approve(ctx, title="Go on?")).approved else "denied"


def capped_app() -> App:
    models = ModelRegistry()
    models.register("scripted/holder", ScriptedModel([call("hold", part=1), reply("done")]))
    models.register("scripted/asker", ScriptedModel([call("ask"), reply("done")]))
    return App(
        agents=[
            define_agent(name="holder", model="scripted/holder", instructions="Hold.", tools=[hold]),
            define_agent(name="asker", model="scripted/asker", instructions="Ask.", tools=[ask]),
        ],
        models=models,
    )


def capped(app: App, max_runs: int) -> ChamviPlugin:
    return ChamviPlugin(
        app,
        index=memory_index(),
        start_collections=False,
        artifacts=ArtifactStore.memory(),
        max_runs=max_runs,
    )


async def completed(chamvi: ChamviClient, run_ids: list[str]) -> None:
    runs = await asyncio.gather(*(chamvi.wait(run_id) for run_id in run_ids))
    assert [run.status for run in runs] == [RunStatus.COMPLETED] * len(run_ids)


async def test_a_fifth_run_waits_for_a_slot_while_four_execute(
    client: Client, task_queue: str, chamvi: ChamviClient
) -> None:
    plugin = capped(capped_app(), max_runs=4)
    async with build_worker(client, plugin, task_queue=task_queue):
        run_ids = [(await chamvi.dispatch("holder")).run_id for _ in range(5)]

        async def four_in_one_waiting() -> bool | None:
            return True if len(floor.inside) == 4 and plugin.slots.waiting == 1 else None

        await eventually(four_in_one_waiting, "four runs in their tool call, the fifth's model call waiting")
        assert plugin.slots.executing == 4 and len(floor.entered) == 4
        [fifth] = set(run_ids) - set(floor.inside)
        floor.gates[floor.entered[0]].set()  # one run's call ends: its slot goes to the fifth

        async def fifth_inside() -> bool | None:
            return True if fifth in floor.inside else None

        await eventually(fifth_inside, "the fifth run in its tool call")
        for run_id in run_ids:
            floor.gates[run_id].set()
        await completed(chamvi, run_ids)
    assert (floor.peak_runs, plugin.slots.peak, plugin.slots.executing) == (4, 4, 0)


async def test_a_run_waiting_for_a_person_frees_its_slot(
    client: Client, task_queue: str, chamvi: ChamviClient
) -> None:
    plugin = capped(capped_app(), max_runs=1)
    async with build_worker(client, plugin, task_queue=task_queue):
        asking = (await chamvi.dispatch("asker")).run_id

        async def waiting() -> bool | None:
            return True if (await chamvi.get_run(asking)).status == RunStatus.WAITING else None

        await eventually(waiting, "the run waiting for its approval")
        holding = (await chamvi.dispatch("holder")).run_id

        async def inside() -> bool | None:
            return True if holding in floor.inside else None

        await eventually(inside, "the other run executing in the one slot")
        floor.gates[holding].set()
        await chamvi.approvals.approve(asking)
        await completed(chamvi, [asking, holding])
    assert plugin.slots.peak == 1
