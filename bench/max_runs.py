"""Runs executing at once per worker (``--max-runs``, the seed's ``concurrencyMaxRuns``): what each cap costs.

Starts its own Temporal dev server and, for each cap, one worker (``build_worker(..., max_runs=N)``)
serving a scripted agent whose model call waits ``MODEL_MS`` (a provider's latency: the worker is idle
meanwhile) and whose tool does ``TOOL_WORK`` of CPU work. It dispatches the same burst of runs for each
cap and prints, per cap: the wall time of the burst, runs per second, the most runs that held a slot
at once (counted by the worker, ``RunSlots.peak``), the CPU seconds the process spent, and the
throughput against the seed's default of 4.

Usage: ``python bench/max_runs.py`` (about a minute), ``python bench/max_runs.py --quick`` (a smoke run).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from _common import leave, ratio, table
from _server import dev_server, machine, options, temporal_path
from temporalio.client import Client

from chamvi import App, ChamviClient, ChamviPlugin, define_agent, tool
from chamvi._lifecycle import memory_index
from chamvi._run_slots import DEFAULT_MAX_RUNS
from chamvi.artifacts import ArtifactStore
from chamvi.models import RunStatus
from chamvi.providers import ChatRequest, ModelRegistry, ScriptedModel, ScriptedTurn, call, reply
from chamvi.runtime import build_worker

MODEL_MS = 150
"""What one model call waits, as a provider's latency would."""
TOOL_WORK = 20_000
"""Rounds of hashing-like arithmetic one tool call does on the CPU (a few milliseconds)."""


@dataclass(frozen=True)
class Plan:
    caps: tuple[int, ...]
    runs: int
    steps: int


FULL = Plan(caps=(1, 2, 4, 8, 16), runs=32, steps=3)
QUICK = Plan(caps=(1, 4), runs=6, steps=1)


@tool
async def crunch(n: int) -> int:
    """Some CPU work, as a tool parsing a document would do."""
    value = n
    for i in range(TOOL_WORK):
        value = (value * 31 + i) % 1_000_003
    return value


def app_for(steps: int) -> App:
    async def slow_turn(request: ChatRequest) -> ScriptedTurn:
        await asyncio.sleep(MODEL_MS / 1000)
        return call("crunch", n=request.step) if request.step < steps else reply("done")

    models = ModelRegistry()
    models.register("scripted/bench", ScriptedModel([slow_turn], repeat_last=True))
    agent = define_agent(name="burst", model="scripted/bench", instructions="Work.", tools=[crunch])
    return App(agents=[agent], models=models)


@dataclass(frozen=True)
class Row:
    cap: int
    seconds: float
    peak: int
    cpu: float

    def rate(self, runs: int) -> float:
        return runs / self.seconds


async def burst(client: Client, plan: Plan, cap: int) -> Row:
    task_queue = f"bench-max-runs-{uuid.uuid4().hex[:8]}"
    app = app_for(plan.steps)
    plugin = ChamviPlugin(
        app, index=memory_index(), start_collections=False, artifacts=ArtifactStore.memory(), max_runs=cap
    )
    chamvi = ChamviClient(client, task_queue=task_queue)
    async with build_worker(client, plugin, task_queue=task_queue):
        warm = await chamvi.dispatch("burst")
        await chamvi.wait(warm.run_id)
        plugin.slots.peak = 0
        cpu, wall = time.process_time(), time.perf_counter()
        run_ids = [(await chamvi.dispatch("burst")).run_id for _ in range(plan.runs)]
        runs = await asyncio.gather(*(chamvi.wait(run_id) for run_id in run_ids))
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert all(run.status == RunStatus.COMPLETED for run in runs), [r.error for r in runs]
    return Row(cap=cap, seconds=wall, peak=plugin.slots.peak, cpu=cpu)


async def main(plan: Plan) -> None:
    path = temporal_path()
    print(f"max_runs: {plan.runs} runs of {plan.steps} steps (model call {MODEL_MS} ms, a CPU-bound tool)")
    print(f"machine: {machine()}")
    async with dev_server(path) as client:
        rows = [await burst(client, plan, cap) for cap in plan.caps]
    base = next((row for row in rows if row.cap == DEFAULT_MAX_RUNS), rows[0])
    print(
        table(
            ["max runs", "burst s", "runs/s", "peak at once", "CPU s", f"runs/s vs {base.cap}"],
            [
                [
                    row.cap,
                    row.seconds,
                    row.rate(plan.runs),
                    row.peak,
                    row.cpu,
                    ratio(row.rate(plan.runs), base.rate(plan.runs)),
                ]
                for row in rows
            ],
        )
    )
    fastest = max(rows, key=lambda row: row.rate(plan.runs))
    print(
        f"fastest here: {fastest.cap} at once ({ratio(fastest.rate(plan.runs), base.rate(plan.runs))} the "
        f"runs/s of {base.cap}). Default kept: {DEFAULT_MAX_RUNS}, the seed's: runs/s grows with the cap "
        "only while model calls wait on the network and the CPU has room, so the best cap depends on the "
        "provider's latency and rate limits, not on chamvi; the cap is what bounds the load a worker puts "
        "on them. Raise it with --max-runs or CHAMVI_MAX_RUNS where the providers take it."
    )


if __name__ == "__main__":
    arguments = options(__doc__, "two caps, a few runs").parse_args()
    asyncio.run(main(QUICK if arguments.quick else FULL))
    leave()
